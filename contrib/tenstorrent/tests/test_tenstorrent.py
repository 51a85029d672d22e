"""accelkit-tenstorrent: the conformance kit, both detection layers, TT_VISIBLE_DEVICES as tt-umd
reads it, and the recorded node."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

import accelkit
import accelkit_tenstorrent
import pytest
from accelkit import Device, FakeHost, load_snapshot
from accelkit.host import CommandResult, ProbeEnv
from accelkit.node import record_snapshot
from accelkit.testing import AcceleratorManagerSuite
from accelkit_tenstorrent import TenstorrentManager
from accelkit_tenstorrent.testing import (
    BUS_IDS,
    SNAPSHOT_ARGV,
    chip,
    make_host,
    snapshot_json,
    write_devices,
)

NODE = Path(__file__).resolve().parents[1] / "nodes" / "tenstorrent-n300-4"


class TestTenstorrent(AcceleratorManagerSuite):
    """The whole kit: contract, detection, visibility round trip, placement, packaging."""

    manager_class = TenstorrentManager

    def make_host(self, count: int, root: Path) -> FakeHost:
        return make_host(count, root)


@pytest.mark.parametrize(
    ("value", "ids"),
    [
        ("1,0", ["0", "1"]),  # tt-umd uses the devices in bus order
        ("2,2,01", ["1", "2"]),  # each once; "01" is logical id 1
        (" 0 , 3 ", ["0", "3"]),
        ("0000:04:00.0", ["0000:04:00.0"]),  # part of a bus id
        # tt-umd's is_bdf_string: a ':' or a '.', and nothing but hex digits besides
        ("0000:c", ["0000:c"]),
        ("03:00", ["03:00"]),
        ("00.0", ["00.0"]),
        ("0000:zz:00.0", []),  # not a bus id: tt-umd refuses to start
        ("0,abc", []),  # tt-umd refuses to start: nothing runs
        ("", []),
        ("NoDevFiles", []),
    ],
)
def test_tt_visible_devices_is_read_as_tt_umd_reads_it(value: str, ids: list[str]) -> None:
    assert TenstorrentManager().read_visible({"TT_VISIBLE_DEVICES": value}) == ids


@pytest.mark.parametrize(
    ("value", "ids", "buses"),
    [
        ("3,0", ["0", "3"], ["0000:03:00.0", "0000:22:00.0"]),
        # a bus-id token names the device and stays its id, as a worker's variable takes it
        ("04:00.0", ["04:00.0"], ["0000:04:00.0"]),
        ("1,03:00", ["1", "03:00"], ["0000:04:00.0", "0000:03:00.0"]),  # no '.' needed
    ],
)
def test_tt_visible_devices_on_the_node_selects_by_id_or_bus_id(
    tmp_path: Path, value: str, ids: list[str], buses: list[str]
) -> None:
    write_devices(tmp_path, 4)
    commands = {SNAPSHOT_ARGV: (0, snapshot_json(4))}
    node = accelkit.detect_node(FakeHost(tmp_path, {"TT_VISIBLE_DEVICES": value}, commands))
    assert [(d.id, d.pci_bus_id) for d in node.devices] == list(zip(ids, buses))


def test_tt_smi_counts_pci_attached_chips_and_says_so_of_remote_ones() -> None:
    node = accelkit.detect_node(FakeHost(commands={SNAPSHOT_ARGV: (0, snapshot_json(2))}))
    assert [(d.id, d.model, d.type_label, d.pci_bus_id) for d in node.devices] == [
        ("0", "n300 L", "Tenstorrent-Wormhole", "0000:03:00.0"),
        ("1", "n300 L", "Tenstorrent-Wormhole", "0000:04:00.0"),
    ]
    notes = [d.message for d in node.diagnostics if d.family == "tenstorrent"]
    assert any("2 chip(s) without a PCI bus id" in n for n in notes)


def test_the_device_files_number_devices_in_bus_order_with_pci_facts(tmp_path: Path) -> None:
    write_devices(tmp_path, 3)
    devices = TenstorrentManager().detect(FakeHost(root=tmp_path))
    assert [(d.id, d.type_label, d.pci_bus_id, d.source) for d in devices] == [
        ("0", "Tenstorrent-Wormhole", "0000:03:00.0", "devfs"),
        ("1", "Tenstorrent-Wormhole", "0000:04:00.0", "devfs"),
        ("2", "Tenstorrent-Wormhole", "0000:21:00.0", "devfs"),
    ]


def test_device_files_without_pci_facts_are_counted_with_a_warning(tmp_path: Path) -> None:
    (tmp_path / "dev" / "tenstorrent").mkdir(parents=True)
    for name in ("0", "1"):
        (tmp_path / "dev" / "tenstorrent" / name).write_text("")
    node = accelkit.detect_node(FakeHost(root=tmp_path))
    assert [(d.id, d.pci_bus_id) for d in node.devices] == [("0", None), ("1", None)]
    warnings = [d for d in node.diagnostics if d.family == "tenstorrent" and d.level == "warning"]
    assert len(warnings) == 1 and "without bus ids" in warnings[0].message


def test_a_grant_writes_logical_ids_that_read_back_in_a_worker(tmp_path: Path) -> None:
    node = accelkit.detect_node(make_host(4, tmp_path))
    allocator = accelkit.Allocator(node)
    allocator.acquire({"TTNPU": 1})
    grant = allocator.acquire({"TTNPU": 2})
    assert grant is not None
    assert grant.env() == {"TT_VISIBLE_DEVICES": "1,2"}
    assert accelkit.visible_ids(env=grant.env())["tenstorrent"] == ["1", "2"]
    with pytest.raises(accelkit.InvalidRequest):
        accelkit.validate_request({"TTNPU": 0.5})


def test_the_recorded_node_replays() -> None:
    node = accelkit.detect_node(host=load_snapshot(NODE))
    assert node.resources == {"TTNPU": 4.0, "accelerator_type:Tenstorrent-Wormhole": 1.0}
    assert node.labels["accelkit/tenstorrent.count"] == "4"


def test_the_recorded_node_is_what_the_fakes_record(tmp_path: Path) -> None:
    """nodes/ is make_host(4) recorded with this plugin alone: re-recording gives the same."""
    (tmp_path / "root").mkdir()
    plugin = accelkit.Registry([accelkit_tenstorrent], autoload=False)
    fresh = record_snapshot(tmp_path / "node", make_host(4, tmp_path / "root"), registry=plugin)
    manifest = "snapshot.json"
    assert json.loads((fresh / manifest).read_text()) == json.loads((NODE / manifest).read_text())
    files = sorted(p.relative_to(fresh).as_posix() for p in fresh.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(NODE).as_posix() for p in NODE.rglob("*") if p.is_file())


def test_a_redacted_recording_hides_the_board_serials(tmp_path: Path) -> None:
    """tt-smi's ``board_id`` is the board's serial: redacted, each board keeps one stand-in
    (its two chips share it) and the node replays the same."""
    plugin = accelkit.Registry([accelkit_tenstorrent], autoload=False)
    redacted = record_snapshot(tmp_path / "r", load_snapshot(NODE), redact=True, registry=plugin)
    (tt_smi,) = json.loads((redacted / "snapshot.json").read_text())["commands"]
    boards = [
        chip["board_info"]["board_id"] for chip in json.loads(tt_smi["stdout"])["device_info"]
    ]
    assert len(boards) == 8 and len(set(boards)) == 4 and boards[0] == boards[1]
    assert not {b for b in boards if b.startswith("100014611")}
    replayed = accelkit.detect_node(load_snapshot(redacted), registry=plugin)
    assert (
        replayed.to_dict() == accelkit.detect_node(load_snapshot(NODE), registry=plugin).to_dict()
    )


def test_a_snapshot_with_no_chip_on_pci_is_no_answer(tmp_path: Path) -> None:
    # every chip remote cannot be (a remote chip is reached through a local one): a renamed
    # field must not hide the boards the device files show
    write_devices(tmp_path, 2)
    text = snapshot_json(2).replace('"bus_id"', '"pcie_bus_id"')
    node = accelkit.detect_node(FakeHost(root=tmp_path, commands={SNAPSHOT_ARGV: (0, text)}))
    assert [(d.id, d.source) for d in node.devices] == [("0", "devfs"), ("1", "devfs")]
    assert "tt-smi lists no chip with a PCI bus id" in " ".join(
        d.message for d in node.diagnostics if d.level == "warning"
    )


def test_a_bus_id_token_is_matched_as_tt_umd_matches_it() -> None:
    """Contained in the device's bus id, case and all: tt-umd's bus ids are lower case
    (``{:04x}:{:02x}:{:02x}.{:x}``) and it compares with ``find``, so ``0000:C1`` names nothing."""
    manager, device = TenstorrentManager(), Device("0", pci_bus_id="0000:c1:00.0")
    assert manager.matches("0000:c1", device) and manager.matches("c1:00.0", device)
    assert not manager.matches("0000:C1", device)
    assert not manager.matches("0000:c2", device)


def test_a_bus_id_token_naming_several_devices_ends_the_list(tmp_path: Path) -> None:
    """tt-umd takes every device ``0000:c`` names (a Galaxy tray); accelkit reads it as it reads
    any ambiguous token, the list ends there with a warning (the plugin's README says so)."""
    tray = [chip(f"0000:{bus}:00.0", "tt-galaxy-wh", f"{bus}") for bus in ("c1", "c2")]
    commands = {SNAPSHOT_ARGV: (0, json.dumps({"device_info": tray}))}
    node = accelkit.detect_node(FakeHost(env={"TT_VISIBLE_DEVICES": "0000:c"}, commands=commands))
    assert node.devices == []
    warnings = [d.message for d in node.diagnostics if d.level == "warning"]
    assert any("'0000:c', which matches 2 detected devices" in w for w in warnings)


class TtSmiHonoursTheVariable(FakeHost):
    """tt-smi as it is: it enumerates through tt-umd (``TopologyDiscovery`` ->
    ``PCIDevice::enumerate_devices``), which lists only the boards ``TT_VISIBLE_DEVICES`` leaves,
    numbered from 0 again; ``env`` of the run, where given, changes the variables it sees."""

    def run(
        self,
        argv: Sequence[str],
        timeout: Optional[float] = None,
        env: Optional[ProbeEnv] = None,
    ) -> CommandResult:
        result = super().run(argv, timeout, env)
        seen = {**self.env, **(env or {})}
        if seen.get("TT_VISIBLE_DEVICES") is None:
            return result
        kept = {f"100014611{int(i):07d}" for i in seen["TT_VISIBLE_DEVICES"].split(",")}
        snapshot = json.loads(result.stdout)
        snapshot["device_info"] = [
            c for c in snapshot["device_info"] if c["board_info"]["board_id"] in kept
        ]
        return CommandResult(0, json.dumps(snapshot))


def test_detection_in_a_granted_worker_still_names_every_device(tmp_path: Path) -> None:
    """A worker granted devices 2 and 3 detects its node: tt-smi is asked with the variable
    lifted (it would list boards 2 and 3 as 0 and 1), and accelkit applies the variable."""
    write_devices(tmp_path, 4)
    commands = {SNAPSHOT_ARGV: (0, snapshot_json(4))}
    host = TtSmiHonoursTheVariable(tmp_path, {"TT_VISIBLE_DEVICES": "2,3"}, commands)
    node = accelkit.detect_node(host)
    assert [(d.id, d.pci_bus_id) for d in node.devices] == [
        ("2", "0000:21:00.0"),
        ("3", "0000:22:00.0"),
    ]
    asked = [env for argv, env in zip(host.runs, host.run_envs) if argv[0] == "tt-smi"]
    assert asked == [{"TT_VISIBLE_DEVICES": None}]
    assert node.detected["tenstorrent"] == 4


@pytest.mark.parametrize(
    ("board", "device", "label"),
    [
        # every board tt-smi names (tt_smi/utils.py, get_board_type); the snapshot adds " L" or
        # " R" to Wormhole boards (tt_smi/backend.py, get_logs_json)
        ("n150 L", None, "Tenstorrent-Wormhole"),
        ("n300 L", None, "Tenstorrent-Wormhole"),
        ("nb_cb L", None, "Tenstorrent-Wormhole"),
        ("wh_4u L", None, "Tenstorrent-Wormhole"),
        ("tt-galaxy-wh L", None, "Tenstorrent-Wormhole"),
        ("bh-scrappy", None, "Tenstorrent-Blackhole"),
        ("p100a", None, "Tenstorrent-Blackhole"),
        ("p150b", None, "Tenstorrent-Blackhole"),
        ("p300c", None, "Tenstorrent-Blackhole"),
        ("tt-galaxy-bh", None, "Tenstorrent-Blackhole"),
        # a board tt-smi cannot name: the chip's PCI device id, else no label at all
        ("N/A", "0xb140", "Tenstorrent-Blackhole"),
        ("N/A L", "0x401e", "Tenstorrent-Wormhole"),
        ("N/A", None, None),
    ],
)
def test_board_names_give_their_architecture(
    tmp_path: Path, board: str, device: Optional[str], label: Optional[str]
) -> None:
    if device is not None:
        function = tmp_path / "sys" / "bus" / "pci" / "devices" / BUS_IDS[0]
        function.mkdir(parents=True)
        (function / "device").write_text(device + "\n")
    snapshot = json.dumps({"device_info": [chip(BUS_IDS[0], board, "1")]})
    host = FakeHost(root=tmp_path, commands={SNAPSHOT_ARGV: (0, snapshot)})
    (found,) = TenstorrentManager().detect(host)
    assert found.type_label == label
    assert found.model == (None if board == "N/A" else board)  # "N/A" is read as no name


@pytest.mark.parametrize(
    ("value", "ids"),
    [
        ("0,7", ["0"]),  # tt-umd: "Invalid device ID in TT_VISIBLE_DEVICES: 7" (runtime_error)
        ("7,0", ["0"]),  # ids in bus order, as tt-umd uses them: 7 still ends the list
        ("1,0000:99", ["1"]),  # tt-umd: "BDF pattern ... did not match any devices"
        ("0000:99:00.0,1", []),  # the first token names nothing: nothing is kept
    ],
)
def test_a_token_naming_no_device_keeps_the_ones_before_it_where_tt_umd_refuses_to_start(
    tmp_path: Path, value: str, ids: list[str]
) -> None:
    """tt-umd throws ``std::runtime_error`` for an id past the end or a bus-id token naming no
    device (``PCIDevice::enumerate_devices``; docs/TT_VISIBLE_DEVICES.md, "Invalid identifier");
    the core ends the list at that token with a warning and keeps what came before, and the
    plugin's diagnostic and README say so (``read_visible`` cannot see the devices)."""
    write_devices(tmp_path, 4)
    commands = {SNAPSHOT_ARGV: (0, snapshot_json(4))}
    node = accelkit.detect_node(FakeHost(tmp_path, {"TT_VISIBLE_DEVICES": value}, commands))
    assert [d.id for d in node.devices] == ids
    mine = [d for d in node.diagnostics if d.family == "tenstorrent"]
    assert any(d.level == "warning" and "matches no detected device" in d.message for d in mine)
    assert next(d.message for d in mine if d.level == "info") == (
        "TT_VISIBLE_DEVICES is read as tt-umd 0.9.3+ reads it, but where tt-umd refuses to start "
        "(an id past the end, a bus-id token naming no device: 0,7 on 4 devices) or takes several "
        "devices (0000:c) the list ends with a warning, keeping what came before (device 0); see "
        "the README"
    )
    docstring = " ".join(str(accelkit_tenstorrent.__doc__).split())  # says the same
    assert "0,7`` on 4 devices: tt-umd refuses to start, accelkit offers device 0" in docstring


def test_a_tt_smi_without_snapshot_no_tty_leaves_detection_to_the_device_files(
    tmp_path: Path,
) -> None:
    """tt-smi before 3.0.5 (tenstorrent/tt-smi 2c6a1c9, 2024-12) has no ``--snapshot_no_tty``
    (argparse exits 2), and its ``-s`` writes a snapshot file under ``~/tt_smi`` and prints no
    JSON: the flag came with JSON on stdout. So ``tt-smi -s`` alone is never run (it would write a
    file on every detection and still give nothing to read); the device files answer."""
    write_devices(tmp_path, 2)
    refused = (2, "", "tt-smi: error: unrecognized arguments: --snapshot_no_tty\n")
    written = (0, "Saved tt-smi log to: /root/tt_smi/12-11-2024_10:00:00_results.json\n")
    host = FakeHost(tmp_path, commands={SNAPSHOT_ARGV: refused, ("tt-smi", "-s"): written})
    node = accelkit.detect_node(host)
    assert [(d.id, d.pci_bus_id, d.source) for d in node.devices] == [
        ("0", "0000:03:00.0", "devfs"),
        ("1", "0000:04:00.0", "devfs"),
    ]
    assert [tuple(argv) for argv in host.runs if argv[0] == "tt-smi"] == [SNAPSHOT_ARGV]
