"""Shared detection mechanics: layers, commands, parsers and PCI walking report, never raise."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

import pytest
from accelkit import CommandResult, Device, FakeHost, Host
from accelkit.detect import detect_layers, parse_csv, parse_json, pci_devices, read_int, run_command
from accelkit.diagnostics import collecting
from accelkit.host._base import MAX_READ_BYTES, HostView
from core_fakes import ReadsRecorded
from hypothesis import given
from hypothesis import strategies as st


def test_first_answering_layer_wins_and_sets_the_source() -> None:
    def absent(host: Host) -> list[Device] | None:
        return None

    def broken(host: Host) -> list[Device] | None:
        raise RuntimeError("driver mismatch")

    def sysfs(host: Host) -> list[Device] | None:
        return [Device(id="0")]

    with collecting("widget") as notes:
        devices = detect_layers(
            FakeHost(), ("library", absent), ("command", broken), ("sysfs", sysfs)
        )
    assert devices == [Device(id="0", source="sysfs")]
    messages = [n.message for n in notes]
    assert any("command layer failed: RuntimeError: driver mismatch" in m for m in messages)
    assert all(n.family == "widget" for n in notes)


def test_an_empty_answer_still_wins() -> None:
    with collecting("widget"):
        devices = detect_layers(
            FakeHost(), ("library", lambda h: []), ("sysfs", lambda h: [Device(id="0")])
        )
    assert devices == []


def test_run_command_notes_every_failure() -> None:
    host = FakeHost(
        commands={
            "ok": (0, "out"),
            "fails": (3, "", "permission denied"),
            "hangs": TimeoutError("took too long"),
        }
    )
    with collecting("widget") as notes:
        assert run_command(host, ["ok"]) == "out"
        assert run_command(host, ["fails", "-x"]) is None
        assert run_command(host, ["hangs"]) is None
        assert run_command(host, ["missing"]) is None
    text = [(n.level, n.message) for n in notes]
    assert ("warning", "`fails -x` exited with 3: permission denied") in text
    assert ("error", "`hangs` timed out: took too long") in text
    assert ("info", "missing is not installed") in text


def test_a_partial_answer_is_read_where_the_tool_documents_one() -> None:
    """``partial`` sees a non-zero exit whole and gives the text to use; None leaves it a
    failure, noted as any; an exit 0 never asks it."""
    host = FakeHost(commands={"some": (15, "0, a\n"), "none": (15, "garbage\n"), "ok": (0, "1\n")})
    seen: list[int] = []

    def fifteen(result: CommandResult) -> Optional[str]:
        seen.append(result.returncode)
        return result.stdout if "," in result.stdout else None

    with collecting("widget") as notes:
        assert run_command(host, ["some"], partial=fifteen) == "0, a\n"
        assert run_command(host, ["none"], partial=fifteen) is None
        assert run_command(host, ["ok"], partial=fifteen) == "1\n"
    assert seen == [15, 15]
    assert [n.message for n in notes] == ["`none` exited with 15: garbage"]


def test_a_failed_command_is_quoted_by_its_error_line_not_its_last_line() -> None:
    # nvidia-smi exiting 15 prints the error for the GPU it cannot reach among the healthy
    # GPUs' rows: the last line quoted was a healthy row, which said nothing of the failure.
    lost = "Unable to determine the device handle for GPU0000:3A:00.0: Unknown Error"
    rows = ["0, GPU-a, NVIDIA H100 80GB HBM3", lost, "2, GPU-c, NVIDIA H100 80GB HBM3", ""]
    host = FakeHost(commands={"smi": (15, "\n".join(rows)), "tool": (2, "a\nlast words\n")})
    with collecting("widget") as notes:
        assert run_command(host, ["smi"]) is None
        assert run_command(host, ["tool"]) is None
    assert [n.message for n in notes] == [
        f"`smi` exited with 15: {lost}",
        "`tool` exited with 2: last words",  # no line reads as an error: the last one
    ]


def test_run_command_passes_env_to_the_host_only_when_given() -> None:
    """A command asked with ``env`` gets it; one asked without calls ``host.run`` as Host
    subclasses written before ``env`` existed define it."""

    class OldHost(FakeHost):
        def run(self, argv: Sequence[str], timeout: Optional[float] = None) -> Any:  # type: ignore[override]
            return super().run(argv, timeout)

    host = FakeHost(commands={"tool": (0, "out")})
    assert run_command(host, ["tool"], env={"TT_VISIBLE_DEVICES": None}) == "out"
    assert run_command(host, ["tool"]) == "out"
    assert host.run_envs == [{"TT_VISIBLE_DEVICES": None}, {}]
    assert run_command(OldHost(commands={"tool": (0, "out")}), ["tool"]) == "out"
    # wrapped (the ledger lifts variables through a HostView; a snapshot records through one),
    # and asked with env (tt-smi is, always): the old host runs it with this process's
    wrapped = HostView(OldHost(commands={"tool": (0, "out")}), [])
    assert run_command(wrapped, ["tool"]) == "out"
    assert run_command(wrapped, ["tool"], env={"TT_VISIBLE_DEVICES": None}) == "out"
    assert run_command(OldHost(commands={"tool": (0, "out")}), ["tool"], env={"X": "1"}) == "out"


def test_parsers_note_garbage() -> None:
    with collecting("widget") as notes:
        assert parse_json("{", "tool output") is None
        assert parse_json('{"a": 1}', "tool output") == {"a": 1}
        assert parse_csv("0, a, b\n\n1, c\n", 3, "tool") == [["0", "a", "b"]]
        assert parse_csv("garbage", 3, "tool") is None
        assert parse_csv("", 3, "tool") == []
    assert sum("not valid JSON" in n.message for n in notes) == 1
    assert sum("has 2 fields, expected 3" in n.message for n in notes) == 1


@given(st.text(), st.integers(min_value=1, max_value=6))
def test_parse_csv_never_raises(text: str, fields: int) -> None:
    rows = parse_csv(text, fields, "fuzz")
    assert rows is None or all(len(row) == fields for row in rows)


def test_pci_devices_filter_by_vendor_and_read_facts(tmp_path: Path) -> None:
    devices = tmp_path / "sys/bus/pci/devices"
    drivers = tmp_path / "sys/bus/pci/drivers/nvidia"
    drivers.mkdir(parents=True)
    for bus, vendor, numa in [
        ("0000:b1:00.0", "0x10de", "1"),
        ("0000:17:00.0", "0x10de", "-1"),
        ("0000:00:1f.0", "0x8086", "0"),
    ]:
        d = devices / bus
        d.mkdir(parents=True)
        (d / "vendor").write_text(vendor + "\n")
        (d / "device").write_text("0x2330\n")
        (d / "numa_node").write_text(numa + "\n")
        os.symlink("../../../bus/pci/drivers/nvidia", d / "driver")
    host = FakeHost(root=tmp_path)
    found = pci_devices(host, 0x10DE)
    assert [d.bus_id for d in found] == ["0000:17:00.0", "0000:b1:00.0"]
    assert [d.numa_node for d in found] == [None, 1]
    assert {d.driver for d in found} == {"nvidia"}
    assert found[0].device == 0x2330


LISTED = "0000\t80860d57\t0\t               0\n0008\t10de2330\t0\t      4000000004\n"
"""``/proc/bus/pci/devices`` listing an Intel bridge and an NVIDIA H100 (vendor, device ids)."""


def pci_tree(root: Path, functions: dict[str, int], listing: str | None) -> None:
    """``functions`` (bus id -> vendor) under sysfs, and ``listing`` as /proc/bus/pci/devices."""
    for bus, vendor in functions.items():
        directory = root / "sys/bus/pci/devices" / bus
        directory.mkdir(parents=True)
        (directory / "vendor").write_text(f"0x{vendor:04x}\n")
    if listing is not None:
        (root / "proc/bus/pci").mkdir(parents=True)
        (root / "proc/bus/pci/devices").write_text(listing)


def test_pci_devices_read_no_function_of_a_vendor_the_kernel_lists_none_of(
    tmp_path: Path,
) -> None:
    pci_tree(tmp_path, {"0000:00:00.0": 0x8086, "0000:00:01.0": 0x10DE}, LISTED)
    host = ReadsRecorded(tmp_path)
    assert pci_devices(host, 0x1AE0) == []  # no Google function: one read, not one a function
    assert host.read == ["/proc/bus/pci/devices"]
    assert [d.bus_id for d in pci_devices(host, 0x10DE)] == ["0000:00:01.0"]
    other = tmp_path / "elsewhere"
    pci_tree(other, {"0000:00:01.0": 0x1AE0}, None)
    moved = ReadsRecorded(tmp_path)
    found = pci_devices(moved, 0x1AE0, "/elsewhere/sys/bus/pci/devices")  # not the machine's
    assert [d.bus_id for d in found] == ["0000:00:01.0"]
    assert "/proc/bus/pci/devices" not in moved.read


@pytest.mark.parametrize(
    "listing",
    [
        None,
        "",
        "0000 10de2330 0\n",
        "0000\t10de23\t0\n",
        "0000\n",
        "0000\t10de2330\t0\n0008\t10de",  # a last line cut short
        "0000\t10de2330\t0\n" * (MAX_READ_BYTES // 16 + 1),  # past the read limit
    ],
    ids=["missing", "empty", "spaces", "short ids", "one field", "cut", "too long"],
)
def test_pci_devices_read_every_function_where_the_listing_cannot_say(
    tmp_path: Path, listing: str | None
) -> None:
    pci_tree(tmp_path, {"0000:00:00.0": 0x8086, "0000:00:01.0": 0x1AE0}, listing)
    assert [d.bus_id for d in pci_devices(FakeHost(root=tmp_path), 0x1AE0)] == ["0000:00:01.0"]


@given(
    st.dictionaries(
        st.integers(0, 255).map(lambda n: f"0000:{n:02x}:00.0"),
        st.sampled_from([0x8086, 0x10DE, 0x1AE0, 0x1002]),
        max_size=6,
    ),
    st.sampled_from([0x8086, 0x10DE, 0x1AE0, 0x1002, 0x1D0F]),
)
def test_the_listing_never_changes_what_pci_devices_finds(
    functions: dict[str, int], vendor: int
) -> None:
    with tempfile.TemporaryDirectory() as listed, tempfile.TemporaryDirectory() as unlisted:
        lines = "".join(f"{n:04x}\t{v:04x}1234\t0\n" for n, v in enumerate(functions.values()))
        pci_tree(Path(listed), functions, lines)
        pci_tree(Path(unlisted), functions, None)
        found = pci_devices(FakeHost(root=listed), vendor)
        assert found == pci_devices(FakeHost(root=unlisted), vendor)
        assert [d.bus_id for d in found] == sorted(b for b, v in functions.items() if v == vendor)


def test_read_int_notes_non_numbers(tmp_path: Path) -> None:
    (tmp_path / "value").write_text("banana\n")
    with collecting("widget") as notes:
        assert read_int(FakeHost(root=tmp_path), "/value") is None
    assert "not a number" in notes[0].message
