"""accelkit-cambricon: the conformance kit, both detection layers, a grant, the recorded node."""

from __future__ import annotations

import json
from pathlib import Path

import accelkit
import accelkit_cambricon
from accelkit import FakeHost, load_snapshot
from accelkit.node import record_snapshot
from accelkit.testing import AcceleratorManagerSuite
from accelkit_cambricon import CambriconManager
from accelkit_cambricon.testing import INFO_ARGV, cnmon_info, make_host, write_devices

NODE = Path(__file__).resolve().parents[1] / "nodes" / "cambricon-mlu370-x8-8"


class TestCambricon(AcceleratorManagerSuite):
    """The whole kit: contract, detection, visibility round trip, placement, packaging."""

    manager_class = CambriconManager

    def make_host(self, count: int, root: Path) -> FakeHost:
        return make_host(count, root)


def test_cnmon_info_gives_model_uuid_memory_and_bus_id() -> None:
    devices = CambriconManager().detect(FakeHost(commands={INFO_ARGV: (0, cnmon_info(2))}))
    assert [(d.id, d.type_label, d.memory_bytes, d.pci_bus_id, d.uuid) for d in devices] == [
        ("0", "MLU370-X8", 48000 * 2**20, "0000:1a:00.0", "77013006-2457-0000-0000-000000000000"),
        ("1", "MLU370-X8", 48000 * 2**20, "0000:1b:00.0", "77013006-2457-0000-0000-000000000001"),
    ]


def test_a_card_block_without_pci_or_uuid_keeps_its_model() -> None:
    text = "Card 0\n    Product Name                   : MLU370-S4\n    Driver      : v4.20.18\n"
    devices = CambriconManager().detect(FakeHost(commands={INFO_ARGV: (0, text)}))
    assert [(d.id, d.model, d.uuid, d.pci_bus_id) for d in devices] == [
        ("0", "MLU370-S4", None, None)
    ]


def test_device_files_alone_give_a_count_not_the_control_file(tmp_path: Path) -> None:
    write_devices(tmp_path, 2)
    node = accelkit.detect_node(FakeHost(root=tmp_path))
    assert [(d.id, d.source) for d in node.devices] == [("0", "devfs"), ("1", "devfs")]


def test_a_grant_writes_mlu_visible_devices_that_reads_back(tmp_path: Path) -> None:
    node = accelkit.detect_node(make_host(4, tmp_path))
    allocator = accelkit.Allocator(node)
    shared = allocator.acquire({"MLU": 0.5})
    pair = allocator.acquire({"MLU": 2})
    assert shared is not None and pair is not None
    assert shared.env() == {"MLU_VISIBLE_DEVICES": "0"}
    assert pair.env() == {"MLU_VISIBLE_DEVICES": "1,2"}
    assert accelkit.visible_ids(env=pair.env())["cambricon"] == ["1", "2"]


def test_mlu_visible_devices_on_the_node_restricts_what_it_offers(tmp_path: Path) -> None:
    write_devices(tmp_path, 4)
    commands = {INFO_ARGV: (0, cnmon_info(4))}
    node = accelkit.detect_node(FakeHost(tmp_path, {"MLU_VISIBLE_DEVICES": "3,1"}, commands))
    assert [d.id for d in node.devices] == ["3", "1"]


def test_the_recorded_node_replays() -> None:
    node = accelkit.detect_node(host=load_snapshot(NODE))
    assert node.resources == {"MLU": 8.0, "accelerator_type:MLU370-X8": 1.0}
    assert node.labels["accelkit/cambricon.count"] == "8"


def test_the_recorded_node_is_what_the_fakes_record(tmp_path: Path) -> None:
    """nodes/ is make_host(8) recorded with this plugin alone: re-recording gives the same."""
    (tmp_path / "root").mkdir()
    plugin = accelkit.Registry([accelkit_cambricon], autoload=False)
    fresh = record_snapshot(tmp_path / "node", make_host(8, tmp_path / "root"), registry=plugin)
    manifest = "snapshot.json"
    assert json.loads((fresh / manifest).read_text()) == json.loads((NODE / manifest).read_text())
    files = sorted(p.relative_to(fresh).as_posix() for p in fresh.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(NODE).as_posix() for p in NODE.rglob("*") if p.is_file())


def test_cnmon_text_without_a_card_block_is_no_answer(tmp_path: Path) -> None:
    # a text not understood must not hide the MLUs the device files show
    write_devices(tmp_path, 2)
    host = FakeHost(
        root=tmp_path, commands={INFO_ARGV: (0, "MLU 0: MLU370-X8\nMLU 1: MLU370-X8\n")}
    )
    node = accelkit.detect_node(host)
    assert [(d.id, d.source) for d in node.devices] == [("0", "devfs"), ("1", "devfs")]
    assert "cnmon info printed no Card <N> block" in " ".join(
        d.message for d in node.diagnostics if d.level == "warning"
    )
