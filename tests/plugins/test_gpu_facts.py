"""The shared GPU helpers: lenient readers of vendor facts, label tables, sysfs walkers."""

from __future__ import annotations

import json
import pathlib
from types import ModuleType
from typing import Any

import accelkit
import pytest
from accelkit.detect import (
    decode,
    detect_layers,
    drm_devices,
    find_field,
    json_records,
    library_session,
    normalise_bus_id,
    numa_node,
    parse_int,
    run_command,
    sanitize_label,
    type_label,
)
from accelkit.device import Device
from accelkit.diagnostics import collecting
from accelkit_plugins.amd.kfd import kfd_bus_id, kfd_gpu_nodes
from core_fakes import ReadsRecorded
from hypothesis import given
from hypothesis import strategies as st


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (29857, 29857),
        ("29857", 29857),
        ("0x74a1", 0x74A1),
        ("0X74A1", 0x74A1),
        (" 0x1002\n", 0x1002),
        ("08", 8),
        ("N/A", None),
        ("", None),
        (None, None),
        (True, None),
        (1.5, None),
    ],
)
def test_parse_int(value: Any, expected: Any) -> None:
    assert parse_int(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("00000000:17:00.0", "0000:17:00.0"),
        ("00000000:9A:00.0", "0000:9a:00.0"),
        ("0000:c1:00.0", "0000:c1:00.0"),
        ("17:00.0", "0000:17:00.0"),
        ("0001:1b:1f.7", "0001:1b:1f.7"),
        ("  0000:18:00.0 ", "0000:18:00.0"),
        ("0000:18:00", None),
        ("GPU-1234", None),
        ("", None),
        (None, None),
    ],
)
def test_normalise_bus_id(value: Any, expected: Any) -> None:
    assert normalise_bus_id(value) == expected


@given(st.text(max_size=30))
def test_normalise_bus_id_never_raises(value: str) -> None:
    result = normalise_bus_id(value)
    assert result is None or normalise_bus_id(result) == result


def test_decode() -> None:
    assert decode(b"NVIDIA A100") == "NVIDIA A100"
    assert decode("GPU-1") == "GPU-1"
    assert decode(b"\xff") == "\ufffd"


@pytest.mark.parametrize(
    ("text", "drop", "prefix", "expected"),
    [
        ("Intel(R) Arc(TM) A770 Graphics", ("Graphics",), "Intel", "Intel-Arc-A770"),
        ("NVIDIA GeForce RTX 4090", ("NVIDIA",), "", "GeForce-RTX-4090"),
        ("Instinct MI300X", (), "AMD", "AMD-Instinct-MI300X"),
        ("AMD Instinct MI300X", (), "AMD", "AMD-Instinct-MI300X"),
        ("  ", (), "AMD", None),
        (None, (), "", None),
        ("A / B__C", (), "", "A-B-C"),
    ],
)
def test_sanitize_label(text: Any, drop: tuple[str, ...], prefix: str, expected: Any) -> None:
    assert sanitize_label(text, drop, prefix) == expected


@given(st.text(max_size=40))
def test_labels_are_always_resource_safe(text: str) -> None:
    label = type_label(text, ((r"\b(X\d+)\b", r"\1"),), ("NVIDIA",), "Vendor")
    assert label is None or (label and all(ch.isalnum() or ch in "-." for ch in label))


def test_type_label_tables() -> None:
    rules = ((r"\bRTX PRO (\d+)", r"RTX-PRO-\1"), (r"Data Center GPU (\w+ \d+)", r"Intel-GPU-\1"))
    assert type_label("NVIDIA RTX PRO 6000 Blackwell", rules) == "RTX-PRO-6000"
    assert type_label("Intel(R) Data Center GPU Max 1550", rules) == "Intel-GPU-Max-1550"
    assert type_label("nvidia rtx pro 4500", rules) == "RTX-PRO-4500"  # case-insensitive
    assert type_label("Something Else", rules, prefix="X") == "X-Something-Else"
    assert type_label(None, rules) is None


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ([{"gpu": 0}, {"gpu": 1}], [{"gpu": 0}, {"gpu": 1}]),
        ({"device_list": [{"device_id": 0}]}, [{"device_id": 0}]),
        ({"version": "1", "gpu_data": [{"gpu": 0}, 3]}, [{"gpu": 0}]),
        ([], []),
        ({"device_list": []}, []),
        ({"error": 3}, None),
        ("text", None),
        (None, None),
    ],
)
def test_json_records(data: Any, expected: Any) -> None:
    assert json_records(data) == expected


def test_find_field_searches_nested_objects_best_name_first() -> None:
    record = {
        "gpu": 0,
        "asic": {"device_id": "0x74a1"},
        "vram": {"size": {"value": 1, "unit": "MB"}},
    }
    assert find_field(record, "device_id") == "0x74a1"
    assert find_field(record, "vram_size_mb", "size") == {"value": 1, "unit": "MB"}
    assert find_field(record, "missing") is None
    assert find_field([record], "gpu") is None
    assert find_field({"gpu": None, "x": {"gpu": 2}}, "gpu") == 2


def library(fails_in: str = "") -> ModuleType:
    module = ModuleType("vendorlib")
    module.calls = []  # type: ignore[attr-defined]

    def call(name: str) -> Any:
        def run() -> None:
            module.calls.append(name)  # type: ignore[attr-defined]
            if name == fails_in:
                raise RuntimeError(f"{name} failed")

        return run

    module.start = call("start")  # type: ignore[attr-defined]
    module.stop = call("stop")  # type: ignore[attr-defined]
    return module


def test_library_session_shuts_down_even_when_the_block_fails() -> None:
    lib = library()
    host = accelkit.FakeHost(modules={"vendorlib": lib})
    with pytest.raises(ValueError), library_session(host, "vendorlib", "start", "stop") as opened:
        assert opened is lib
        raise ValueError("reading a device failed")
    assert lib.calls == ["start", "stop"]  # type: ignore[attr-defined]


def test_library_session_without_the_library_yields_none_and_notes_why() -> None:
    with (
        collecting("x") as notes,
        library_session(accelkit.FakeHost(), "vendorlib", "a", "b") as lib,
    ):
        assert lib is None
    assert [n.message for n in notes] == ["Python library vendorlib is not installed"]


def test_a_failing_init_is_not_followed_by_a_shutdown() -> None:
    lib = library(fails_in="start")
    host = accelkit.FakeHost(modules={"vendorlib": lib})
    with pytest.raises(RuntimeError), library_session(host, "vendorlib", "start", "stop"):
        pass
    assert lib.calls == ["start"]  # type: ignore[attr-defined]


def pci(root: pathlib.Path, bus: str, vendor: str, numa: str = "0") -> None:
    directory = root / "sys/bus/pci/devices" / bus
    directory.mkdir(parents=True)
    (directory / "vendor").write_text(vendor + "\n")
    (directory / "device").write_text("0x1234\n")
    (directory / "numa_node").write_text(numa + "\n")


def test_numa_node(tmp_path: pathlib.Path) -> None:
    pci(tmp_path, "0000:18:00.0", "0x10de", "1")
    pci(tmp_path, "0000:19:00.0", "0x10de", "-1")
    host = accelkit.FakeHost(root=tmp_path)
    assert numa_node(host, "00000000:18:00.0") == 1
    assert numa_node(host, b"0000:18:00.0") == 1
    assert numa_node(host, "0000:19:00.0") is None  # sysfs says -1 without NUMA
    assert numa_node(host, "0000:20:00.0") is None
    assert numa_node(host, None) is None


def test_the_winning_layer_is_completed_by_detection(tmp_path: pathlib.Path) -> None:
    pci(tmp_path, "0000:18:00.0", "0x10de", "1")
    host = accelkit.FakeHost(root=tmp_path)
    answered = [
        Device("0", pci_bus_id="00000000:18:00.0", model="N/A", uuid="", type_label="T"),
        Device("1", pci_bus_id="garbage", numa_node=3, model="M", source="override"),
        Device("2", pci_bus_id="18:00.0", uuid="[N/A]"),
    ]
    with collecting("x") as notes:
        devices = detect_layers(host, ("library", lambda h: None), ("command", lambda h: answered))
    assert [(d.pci_bus_id, d.numa_node, d.model, d.uuid, d.source) for d in devices] == [
        ("0000:18:00.0", 1, None, None, "command"),
        (None, 3, "M", None, "override"),
        ("0000:18:00.0", 1, None, None, "command"),
    ]
    assert [d.type_label for d in devices] == ["T", None, None]
    assert [n.message for n in notes] == ["3 device(s) from the command layer"]


def test_a_missing_program_asked_by_several_layers_is_noted_once() -> None:
    host = accelkit.FakeHost(commands={("tool", "--ok"): (0, "fine")})

    def layer(h: accelkit.Host) -> None:
        run_command(h, ("tool", "--new"))
        run_command(h, ("tool", "--old"))

    with collecting("x") as notes:
        detect_layers(host, ("command", layer), ("command", layer))
        assert run_command(host, ("tool", "--ok")) == "fine"  # still asked: only noted once
    assert [n.message for n in notes].count("tool is not installed") == 1


def test_drm_devices_count_a_card_and_its_render_node_once(tmp_path: pathlib.Path) -> None:
    assert drm_devices(accelkit.FakeHost(root=tmp_path), 0x1002) is None
    pci(tmp_path, "0000:c1:00.0", "0x1002")
    pci(tmp_path, "0000:03:00.0", "0x1a03")
    drm = tmp_path / "sys/class/drm"
    for name, bus in [
        ("card0", "0000:03:00.0"),
        ("card1", "0000:c1:00.0"),
        ("renderD128", "0000:c1:00.0"),
        ("card1-DP-1", "0000:c1:00.0"),  # a connector, not a device
    ]:
        (drm / name).mkdir(parents=True)
        (drm / name / "device").symlink_to(f"/sys/bus/pci/devices/{bus}")
    (drm / "version").write_text("drm 1.1.0 20060810\n")
    host = ReadsRecorded(root=tmp_path)
    found = drm_devices(host, 0x1002)
    assert [d.bus_id for d in found or []] == ["0000:c1:00.0"]
    assert found is not None and found[0].device == 0x1234 and found[0].numa_node == 0
    # Of the other vendor's GPU, only its vendor; of the render node, only its vendor too.
    assert host.read == [
        "/proc/bus/pci/devices",  # missing in this tree: every DRM node's vendor is read
        "/sys/class/drm/card0/device/vendor",
        "/sys/class/drm/card1/device/vendor",
        "/sys/class/drm/card1/device/numa_node",
        "/sys/class/drm/card1/device/vendor",
        "/sys/class/drm/card1/device/device",
        "/sys/class/drm/card1/device/class",
        "/sys/class/drm/renderD128/device/vendor",
    ]


def test_drm_devices_read_no_node_of_a_vendor_the_kernel_lists_no_function_of(
    tmp_path: pathlib.Path,
) -> None:
    pci(tmp_path, "0000:17:00.0", "0x10de")
    (tmp_path / "sys/class/drm/card0").mkdir(parents=True)
    (tmp_path / "sys/class/drm/card0/device").symlink_to("/sys/bus/pci/devices/0000:17:00.0")
    (tmp_path / "proc/bus/pci").mkdir(parents=True)
    (tmp_path / "proc/bus/pci/devices").write_text("1700\t10de2330\t0\n")
    host = ReadsRecorded(root=tmp_path)
    assert drm_devices(host, 0x1002) == []  # an NVIDIA server: AMD's fallback reads one file
    assert host.read == ["/proc/bus/pci/devices"]
    assert [d.bus_id for d in drm_devices(host, 0x10DE) or []] == ["0000:17:00.0"]


def test_kfd_gpu_nodes_and_their_bus_ids(tmp_path: pathlib.Path) -> None:
    assert kfd_gpu_nodes(accelkit.FakeHost(root=tmp_path)) is None
    nodes = tmp_path / "sys/class/kfd/kfd/topology/nodes"
    for number, text in [
        ("0", "cpu_cores_count 64\nsimd_count 0\n"),
        ("10", "simd_count 1216\nvendor_id 4098\nlocation_id 49408\ndomain 0\n"),
        ("2", "simd_count 1216\nvendor_id 4098\nlocation_id 3072\ndomain 1\nbogus line here x\n"),
        ("3", "\0binary"),
    ]:
        (nodes / number).mkdir(parents=True)
        (nodes / number / "properties").write_text(text)
    found = kfd_gpu_nodes(accelkit.FakeHost(root=tmp_path)) or []
    assert [kfd_bus_id(node) for node in found] == ["0001:0c:00.0", "0000:c1:00.0"]  # node order
    assert kfd_bus_id({}) is None
    assert json.dumps(found)  # plain data
