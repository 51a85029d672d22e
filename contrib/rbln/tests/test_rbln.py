"""accelkit-rbln: the conformance kit, each detection layer, and the recorded node."""

from __future__ import annotations

import json
from pathlib import Path

import accelkit
import accelkit_rbln
import pytest
from accelkit import FakeHost, load_snapshot
from accelkit.node import record_snapshot
from accelkit.scaling import ScalingConfig
from accelkit.testing import AcceleratorManagerSuite
from accelkit_rbln import RblnManager
from accelkit_rbln.testing import SMI_ARGV, fake_rebel, make_host, smi_json, write_devices

NODE = Path(__file__).resolve().parents[1] / "nodes" / "rbln-atom-plus-4"


class TestRbln(AcceleratorManagerSuite):
    """The whole kit: contract, detection, visibility round trip, placement, packaging."""

    manager_class = RblnManager

    def make_host(self, count: int, root: Path) -> FakeHost:
        return make_host(count, root)


def test_the_library_layer_counts_every_npu_with_rbln_devices_lifted() -> None:
    host = FakeHost(env={"RBLN_DEVICES": "1"}, modules={"rebel": fake_rebel(3, "RBLN-CA25")})
    devices = RblnManager().detect(host)
    assert [(d.id, d.type_label, d.source) for d in devices] == [
        ("0", "RBLN-CA25", "library"),
        ("1", "RBLN-CA25", "library"),
        ("2", "RBLN-CA25", "library"),
    ]
    assert host.probe_envs == [{"RBLN_DEVICES": None}]


@pytest.mark.parametrize("npu_as_number", [True, False])
def test_rbln_smi_json_of_both_sdk_generations(tmp_path: Path, npu_as_number: bool) -> None:
    host = FakeHost(commands={SMI_ARGV: (0, smi_json(2, npu_as_number=npu_as_number))})
    devices = RblnManager().detect(host)
    assert [(d.id, d.model, d.memory_bytes, d.pci_bus_id) for d in devices] == [
        ("0", "RBLN-CA12", 16877879296, "0000:51:00.0"),
        ("1", "RBLN-CA12", 16877879296, "0000:52:00.0"),
    ]


def test_the_deprecated_rbln_stat_answers_when_rbln_smi_is_missing() -> None:
    host = FakeHost(commands={("rbln-stat", "-j"): (0, smi_json(1))})
    assert [d.id for d in RblnManager().detect(host)] == ["0"]


def test_device_files_alone_give_a_count_and_say_so(tmp_path: Path) -> None:
    write_devices(tmp_path, 2)
    node = accelkit.detect_node(FakeHost(root=tmp_path))
    assert [(d.id, d.source) for d in node.devices] == [("0", "devfs"), ("1", "devfs")]
    notes = [d.message for d in node.diagnostics if d.family == "rbln"]
    assert any("counted from /dev/rbln" in n for n in notes)
    assert any("not confirmed" in n for n in notes)


def test_a_grant_writes_rbln_devices_and_reads_back_in_a_worker(tmp_path: Path) -> None:
    node = accelkit.detect_node(make_host(4, tmp_path))
    allocator = accelkit.Allocator(node)
    first = allocator.acquire({"RBLN": 1})
    second = allocator.acquire({"RBLN": 2})
    assert first is not None and second is not None
    assert first.env() == {"RBLN_DEVICES": "0"}
    assert second.env() == {"RBLN_DEVICES": "1,2"}
    assert accelkit.visible_ids(env=second.env())["rbln"] == ["1", "2"]
    with pytest.raises(accelkit.InvalidRequest):
        accelkit.validate_request({"RBLN": 0.5})


def test_rbln_devices_on_the_node_restricts_what_it_offers(tmp_path: Path) -> None:
    write_devices(tmp_path, 4)
    commands = {SMI_ARGV: (0, smi_json(4))}
    node = accelkit.detect_node(FakeHost(tmp_path, {"RBLN_DEVICES": "2,3"}, commands))
    assert [d.id for d in node.devices] == ["2", "3"]


def test_the_recorded_node_replays() -> None:
    node = accelkit.detect_node(host=load_snapshot(NODE))
    assert node.resources == {"RBLN": 4.0, "accelerator_type:RBLN-CA12": 1.0}
    assert node.labels["accelkit/rbln.count"] == "4"


def test_the_recorded_node_is_what_the_fakes_record(tmp_path: Path) -> None:
    """nodes/ is make_host(4) recorded with this plugin alone: re-recording gives the same."""
    (tmp_path / "root").mkdir()
    plugin = accelkit.Registry([accelkit_rbln], autoload=False)
    fresh = record_snapshot(tmp_path / "node", make_host(4, tmp_path / "root"), registry=plugin)
    manifest = "snapshot.json"
    assert json.loads((fresh / manifest).read_text()) == json.loads((NODE / manifest).read_text())
    files = sorted(p.relative_to(fresh).as_posix() for p in fresh.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(NODE).as_posix() for p in NODE.rglob("*") if p.is_file())


def test_rbln_smi_records_without_a_device_are_no_answer(tmp_path: Path) -> None:
    # a JSON shape not understood must not hide the NPUs the device files show
    write_devices(tmp_path, 2)
    text = json.dumps({"devices": [{"name": "RBLN-CA12"}, {"name": "RBLN-CA12"}]})
    node = accelkit.detect_node(FakeHost(root=tmp_path, commands={SMI_ARGV: (0, text)}))
    assert [(d.id, d.source) for d in node.devices] == [("0", "devfs"), ("1", "devfs")]
    assert "rbln-smi lists a device without an index" in " ".join(
        d.message for d in node.diagnostics if d.level == "warning"
    )


def test_collectives_use_torch_rbln_s_rbln_ccl_backend() -> None:
    """torch-rbln registers ``rbln-ccl`` for torch.distributed (docs.rbln.ai, RBLN PyTorch): a
    training plan on RBLN NPUs names it, not gloo."""
    assert ScalingConfig(num_workers=2, accelerator="rbln").backend == "rbln-ccl"
