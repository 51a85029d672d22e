"""accelkit-furiosa: the conformance kit, each detection layer, FURIOSA_DEVICES, the node."""

from __future__ import annotations

import json
from pathlib import Path

import accelkit
import accelkit_furiosa
import pytest
from accelkit import FakeHost, load_snapshot
from accelkit.node import record_snapshot
from accelkit.testing import AcceleratorManagerSuite
from accelkit_furiosa import FuriosaManager, arch_label
from accelkit_furiosa.testing import fake_furiosa_smi, make_host, write_devices

NODE = Path(__file__).resolve().parents[1] / "nodes" / "furiosa-rngd-8"


class TestFuriosa(AcceleratorManagerSuite):
    """The whole kit: contract, detection, visibility round trip, placement, packaging."""

    manager_class = FuriosaManager

    def make_host(self, count: int, root: Path) -> FakeHost:
        return make_host(count, root)


@pytest.mark.parametrize(
    ("value", "ids"),
    [
        ("npu:0,npu:3", ["0", "3"]),
        (" npu:1 , npu:2 ", ["1", "2"]),
        ("npu:0:0-3,npu:0:4-7,npu:2:0", ["0", "2"]),  # core groups name their NPU once
        ("3,npu:1", ["3", "1"]),  # bare indices, as Ray reads them
        ("npu:1,rngd*2,npu:2", ["1"]),  # an implicit spec names no NPU: the list ends there
        ("", []),
        ("NoDevFiles", []),
    ],
)
def test_furiosa_devices_is_read_as_npu_tokens(value: str, ids: list[str]) -> None:
    assert FuriosaManager().read_visible({"FURIOSA_DEVICES": value}) == ids


def test_a_grant_writes_npu_tokens_that_read_back_in_a_worker(tmp_path: Path) -> None:
    node = accelkit.detect_node(make_host(4, tmp_path))
    allocator = accelkit.Allocator(node)
    allocator.acquire({"FURIOSA": 1})
    grant = allocator.acquire({"FURIOSA": 2})
    assert grant is not None
    assert grant.env() == {"FURIOSA_DEVICES": "npu:1,npu:2"}
    assert accelkit.visible_ids(env=grant.env())["furiosa"] == ["1", "2"]
    with pytest.raises(accelkit.InvalidRequest):
        accelkit.validate_request({"FURIOSA": 0.5})


@pytest.mark.parametrize(
    ("arch", "label"),
    [
        ("Arch.Rngd", "FURIOSA_RNGD"),
        ("RngdMax", "FURIOSA_RNGDMAX"),
        ("rngd-s", "FURIOSA_RNGDS"),
        ("rngd+", "FURIOSA_RNGDPLUS"),
        ("<Arch.Rngd: 1>", "FURIOSA_RNGD"),
        (None, None),
    ],
)
def test_type_labels_are_rays(arch: str, label: str) -> None:
    assert arch_label(arch) == label


def test_the_library_layer_names_npus_and_their_architecture() -> None:
    host = FakeHost(modules={"furiosa_smi_py": fake_furiosa_smi(2, "RngdMax")})
    devices = FuriosaManager().detect(host)
    assert [(d.id, d.type_label, d.pci_bus_id, d.source) for d in devices] == [
        ("0", "FURIOSA_RNGDMAX", "0000:17:00.0", "library"),
        ("1", "FURIOSA_RNGDMAX", "0000:2a:00.0", "library"),
    ]


def test_the_device_files_give_ids_bus_ids_and_uuids_but_no_label(tmp_path: Path) -> None:
    write_devices(tmp_path, 2)
    node = accelkit.detect_node(FakeHost(root=tmp_path))
    assert [(d.id, d.pci_bus_id, d.type_label) for d in node.devices] == [
        ("0", "0000:17:00.0", None),
        ("1", "0000:2a:00.0", None),
    ]
    notes = [d.message for d in node.diagnostics if d.family == "furiosa"]
    assert any("no type label" in n for n in notes)
    assert any("not confirmed" in n for n in notes)


def test_furiosa_devices_on_the_node_restricts_what_it_offers(tmp_path: Path) -> None:
    write_devices(tmp_path, 4)
    node = accelkit.detect_node(FakeHost(tmp_path, {"FURIOSA_DEVICES": "npu:1,npu:3"}))
    assert [d.id for d in node.devices] == ["1", "3"]


def test_the_recorded_node_replays() -> None:
    node = accelkit.detect_node(host=load_snapshot(NODE))
    assert node.resources == {"FURIOSA": 8.0}
    assert node.labels["accelkit/furiosa.count"] == "8"


def test_the_recorded_node_is_what_the_fakes_record(tmp_path: Path) -> None:
    """nodes/ is make_host(8) recorded with this plugin alone: re-recording gives the same."""
    (tmp_path / "root").mkdir()
    plugin = accelkit.Registry([accelkit_furiosa], autoload=False)
    fresh = record_snapshot(tmp_path / "node", make_host(8, tmp_path / "root"), registry=plugin)
    manifest = "snapshot.json"
    assert json.loads((fresh / manifest).read_text()) == json.loads((NODE / manifest).read_text())
    files = sorted(p.relative_to(fresh).as_posix() for p in fresh.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(NODE).as_posix() for p in NODE.rglob("*") if p.is_file())


def test_devices_named_otherwise_than_npu_n_are_no_answer(tmp_path: Path) -> None:
    # a library naming its devices in a way not understood must not hide the device files
    write_devices(tmp_path, 2)
    library = fake_furiosa_smi(2)
    for device in library.list_devices():
        info = device.device_info()
        info.name = lambda: "rngd"
        device.device_info = lambda info=info: info
    node = accelkit.detect_node(FakeHost(root=tmp_path, modules={"furiosa_smi_py": library}))
    assert [(d.id, d.source) for d in node.devices] == [("0", "devfs"), ("1", "devfs")]


def test_the_readme_cites_the_files_its_sysfs_layout_comes_from() -> None:
    """The device-file layer's paths (``/dev/rngd/npu<N>mgmt``, ``rngd!npu<N>mgmt`` under
    ``/sys/class/rngd_mgmt``) are libfuriosa-kubernetes's ``pkg/manifest/rngd.go``; the
    furiosa-smi-go ``pkg/smi/sysfs.go`` once cited is on no commit of its main branch, and what
    rests on it alone is listed as not confirmed."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    sources = readme.split("## Sources")[1].split("## Not confirmed")[0]
    assert "`furiosa-ai/libfuriosa-kubernetes`" in sources
    assert "pkg/manifest/rngd.go" in sources and '"rngd!%smgmt"' in sources
    assert "pkg/smi/sysfs.go" not in sources
    unconfirmed = readme.split("## Not confirmed")[1]
    assert "`busname` (the bus id) and `device_uuid`" in unconfirmed
