"""accelkit-tenstorrent: the conformance kit, both detection layers, TT_VISIBLE_DEVICES as tt-umd
reads it, and the recorded node."""

from __future__ import annotations

import json
from pathlib import Path

import accelkit
import accelkit_tenstorrent
import pytest
from accelkit import FakeHost, load_snapshot
from accelkit.node import record_snapshot
from accelkit.testing import AcceleratorManagerSuite
from accelkit_tenstorrent import TenstorrentManager
from accelkit_tenstorrent.testing import SNAPSHOT_ARGV, make_host, snapshot_json, write_devices

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
