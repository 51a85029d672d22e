"""The Google TPU plugin: data sheet, detection through device files and PCI, pod slice facts."""

from __future__ import annotations

import os
from pathlib import Path

import accelkit
import pytest
from accelkit import FakeHost, InvalidRequest
from accelkit.diagnostics import collecting
from accelkit.host import load_snapshot
from accelkit.registry import contract_errors
from accelkit_plugins.tpu import CHIP_BOUNDS, HOST_BOUNDS, TpuManager
from accelkit_plugins.tpu import testing as fake
from hypothesis import given
from hypothesis import strategies as st

SNAPSHOT = Path(__file__).parents[2] / "examples/nodes/tpu-v6e-8"
GAUDI_SNAPSHOT = SNAPSHOT.parent / "gaudi2-8"
BOUNDS = (*CHIP_BOUNDS, *HOST_BOUNDS)
MANAGER = TpuManager()


def detect(host: FakeHost) -> tuple[list[accelkit.Device], list[str]]:
    with collecting("tpu") as notes:
        devices = MANAGER.detect(host)
    return devices, [n.message for n in notes]


def pod_env(accelerator_type: str = "v6e-16", worker: str = "0") -> dict[str, str]:
    return {
        "TPU_ACCELERATOR_TYPE": accelerator_type,
        "TPU_TOPOLOGY": "4x4",
        "TPU_WORKER_ID": worker,
        "TPU_NAME": "slice-a",
    }


# -- data sheet ------------------------------------------------------------------------------


def test_data_sheet() -> None:
    assert (MANAGER.name, MANAGER.resource_name) == ("tpu", "TPU")
    assert MANAGER.visible_devices_env_var == "TPU_VISIBLE_CHIPS"
    assert set(MANAGER.env_vars_read) == {
        "TPU_VISIBLE_CHIPS",
        "TPU_CHIPS_PER_HOST_BOUNDS",
        "TPU_CHIPS_PER_PROCESS_BOUNDS",
        "TPU_HOST_BOUNDS",
        "TPU_PROCESS_BOUNDS",
        "TPU_ACCELERATOR_TYPE",
        "TPU_TOPOLOGY",
        "TPU_WORKER_ID",
        "TPU_NAME",
        "ALLOW_MULTIPLE_LIBTPU_LOAD",
        "ACCELKIT_TPU_METADATA",
        "ACCELKIT_TPU_METADATA_URL",
    }
    assert (MANAGER.frameworks.device, MANAGER.frameworks.collective) == ("xla", "xla")
    assert MANAGER.scheduling.placement is accelkit.ALIGNED_BLOCKS
    assert contract_errors(MANAGER) == []
    assert accelkit.get_manager("tpu").name == "tpu"


@pytest.mark.parametrize(
    ("value", "ids"),
    [("0,1", ["0", "1"]), (" 4 , 5 ", ["4", "5"]), ("", []), ("NoDevFiles", []), ("  ", [])],
)
def test_read_visible(value: str, ids: list[str]) -> None:
    assert MANAGER.read_visible({"TPU_VISIBLE_CHIPS": value}) == ids


def test_bounds_and_pod_variables_are_never_read_as_chip_ids() -> None:
    env = {name: "1,2,1" for name in BOUNDS} | pod_env()
    assert MANAGER.read_visible(env) is None


@pytest.mark.parametrize(
    ("ids", "chips"),
    [(["3"], "1,1,1"), (["2", "3"], "1,2,1"), (["4", "5", "6", "7"], "2,2,1")],
)
def test_a_block_writes_its_bounds_in_both_spellings(ids: list[str], chips: str) -> None:
    env = MANAGER.visibility_env(ids)
    assert env["TPU_VISIBLE_CHIPS"] == ",".join(ids)
    assert env["TPU_CHIPS_PER_HOST_BOUNDS"] == env["TPU_CHIPS_PER_PROCESS_BOUNDS"] == chips
    assert env["TPU_HOST_BOUNDS"] == env["TPU_PROCESS_BOUNDS"] == "1,1,1"
    assert env["ALLOW_MULTIPLE_LIBTPU_LOAD"] == "1"  # else libtpu's lock aborts a second process
    assert all(" " not in value for value in env.values() if value is not None)


def test_the_whole_host_unsets_everything() -> None:
    everything = dict.fromkeys(("TPU_VISIBLE_CHIPS", *BOUNDS, "ALLOW_MULTIPLE_LIBTPU_LOAD"))
    assert MANAGER.visibility_env([str(n) for n in range(8)]) == everything
    assert MANAGER.visibility_env(["0", "1", "2", "3"], total=4) == everything
    assert MANAGER.visibility_env(["0", "1", "2", "3"], total=8)["TPU_VISIBLE_CHIPS"] == "0,1,2,3"


def test_hiding_every_chip_writes_nothing_visible_and_no_bounds() -> None:
    shared = "ALLOW_MULTIPLE_LIBTPU_LOAD"
    assert MANAGER.visibility_env([]) == {"TPU_VISIBLE_CHIPS": ""} | dict.fromkeys(
        (*BOUNDS, shared)
    )


def test_a_block_of_three_is_refused_with_the_sizes_that_work() -> None:
    with pytest.raises(ValueError, match="1, 2 or 4 chips"):
        MANAGER.visibility_env(["0", "1", "2"])


@pytest.mark.parametrize("quantity", [1, 2, 4, 8])
def test_block_sizes_are_allowed(quantity: int) -> None:
    assert MANAGER.validate_quantity(quantity) == quantity * 10_000


@pytest.mark.parametrize("quantity", [0.5, 3, 6, 16])
def test_other_quantities_are_refused(quantity: float) -> None:
    with pytest.raises(InvalidRequest, match="1, 2, 4, 8"):
        MANAGER.validate_quantity(quantity)


def test_two_chip_blocks_are_aligned() -> None:
    free = 0b1110  # chip 0 taken: {1, 2} is contiguous but not aligned
    assert MANAGER.scheduling.placement.choose(free, 2) == 0b1100


# -- detection -------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [0, 1, 2, 4, 8])
def test_fake_hosts_have_exactly_their_chips(count: int, tmp_path: Path) -> None:
    devices, _ = detect(fake.make_host(count, tmp_path))
    assert [d.id for d in devices] == [str(n) for n in range(count)]
    assert {d.type_label for d in devices} <= {"TPU-V6E"}
    assert {d.source for d in devices} <= {"devfs"}
    assert fake.GVNIC_BUS_ID not in {d.pci_bus_id for d in devices}


def test_chip_facts_come_from_the_pci_function(tmp_path: Path) -> None:
    devices, _ = detect(fake.make_host(2, tmp_path))
    assert devices[1].pci_bus_id == fake.chip_bus_id(1)
    assert (devices[1].model, devices[1].numa_node) == ("TPU v6e", 0)


def test_v4_chips_are_found_through_accel_files(tmp_path: Path) -> None:
    fake.write_chips(tmp_path, 4, device=0x005E, vfio=False)
    devices, _ = detect(FakeHost(root=tmp_path))
    assert [(d.id, d.type_label, d.source) for d in devices] == [
        (str(n), "TPU-V4", "devfs") for n in range(4)
    ]


def _foreign_accel(root: Path, vendor: int, inside_directory: bool) -> None:
    fake.write_pci_function(root, "0000:17:00.0", vendor, 0x2901, 0x030200)
    klass = root / "sys/class/accel/accel0"
    klass.mkdir(parents=True)
    os.symlink("../../../devices/pci0000:00/0000:17:00.0", klass / "device")
    node = root / ("dev/accel/accel0" if inside_directory else "dev/accel0")
    node.parent.mkdir(parents=True, exist_ok=True)
    node.touch()


@pytest.mark.parametrize(
    ("vendor", "inside_directory"),
    [(0x10DE, True), (0x1DA3, True), (0x10DE, False)],
    ids=["nvidia-570", "habana", "non-google-accel0"],
)
def test_another_drivers_accel_file_is_never_a_tpu(
    vendor: int, inside_directory: bool, tmp_path: Path
) -> None:
    _foreign_accel(tmp_path, vendor, inside_directory)
    devices, notes = detect(FakeHost(root=tmp_path))
    assert devices == []
    assert "no detection layer answered: no devices" in notes


@pytest.mark.skipif(not GAUDI_SNAPSHOT.is_dir(), reason="the Gaudi snapshot is not there")
def test_a_gaudi_node_with_accel_files_is_not_a_tpu_node() -> None:
    host = load_snapshot(GAUDI_SNAPSHOT)
    assert host.exists("/dev/accel/accel0")
    assert detect(host)[0] == []


def test_a_gpu_node_with_accel_files_and_no_tpu_has_no_tpu_node_resources(tmp_path: Path) -> None:
    _foreign_accel(tmp_path, 0x10DE, inside_directory=True)
    node = accelkit.detect_node(FakeHost(root=tmp_path))
    assert "TPU" not in node.resources
    assert [d for d in node.devices if d.family == "tpu"] == []


def test_a_vfio_group_of_a_google_nic_or_another_vendor_is_not_a_tpu(tmp_path: Path) -> None:
    for group, (bus_id, vendor, device) in enumerate(
        [(fake.GVNIC_BUS_ID, 0x1AE0, 0x0042), ("0000:00:06.0", 0x15B3, 0x101E)]
    ):
        fake.write_pci_function(tmp_path, bus_id, vendor, device, 0x020000)
        members = tmp_path / f"sys/kernel/iommu_groups/{group}/devices"
        members.mkdir(parents=True)
        os.symlink(f"../../../../devices/pci0000:00/{bus_id}", members / bus_id)
        (tmp_path / "dev/vfio").mkdir(parents=True, exist_ok=True)
        (tmp_path / f"dev/vfio/{group}").touch()
    assert detect(FakeHost(root=tmp_path))[0] == []


def test_chips_without_device_files_come_from_the_pci_bus_with_a_note(tmp_path: Path) -> None:
    fake.write_chips(tmp_path, 4)
    for group in range(4):
        (tmp_path / f"dev/vfio/{group}").unlink()
    devices, notes = detect(FakeHost(root=tmp_path))
    assert [(d.id, d.source) for d in devices] == [(str(n), "sysfs") for n in range(4)]
    assert any("no /dev/accel* or /dev/vfio/* file" in n for n in notes)


def test_the_pod_type_names_the_generation_over_the_pci_id(tmp_path: Path) -> None:
    fake.write_chips(tmp_path, 1)
    devices, _ = detect(FakeHost(root=tmp_path, env={"TPU_ACCELERATOR_TYPE": "v5litepod-8"}))
    assert devices[0].type_label == "TPU-V5LITEPOD"


@pytest.mark.parametrize(("subsystem", "label"), [(0x004E, "TPU-V2"), (0x004F, "TPU-V3")])
def test_v2_and_v3_are_told_apart_by_subsystem(subsystem: int, label: str, tmp_path: Path) -> None:
    fake.write_chips(tmp_path, 1, device=0x0027, vfio=False)
    (tmp_path / fake.PCI_ROOT / fake.chip_bus_id(0) / "subsystem_device").write_text(
        f"{subsystem:#06x}\n"
    )
    assert detect(FakeHost(root=tmp_path))[0][0].type_label == label


def test_an_unknown_accelerator_of_google_gets_a_sensible_label(tmp_path: Path) -> None:
    fake.write_chips(tmp_path, 2, device=0x0099)
    devices, notes = detect(FakeHost(root=tmp_path))
    assert [(d.type_label, d.model) for d in devices] == [("TPU", "TPU (PCI device 0x0099)")] * 2
    assert any("0x0099: unknown generation" in n for n in notes)


def test_garbage_and_binary_sysfs_files_give_no_chip_and_no_exception(tmp_path: Path) -> None:
    fake.write_chips(tmp_path, 2)
    function = tmp_path / fake.PCI_ROOT / fake.chip_bus_id(0)
    (function / "vendor").write_bytes(b"\x00\xff\x00")
    (tmp_path / fake.PCI_ROOT / fake.chip_bus_id(1) / "vendor").write_text("google\n")
    devices, notes = detect(FakeHost(root=tmp_path))
    assert devices == []
    assert any("not a number" in n for n in notes)


# -- the pod slice ---------------------------------------------------------------------------


def test_every_host_of_a_slice_offers_the_slice_and_worker_0_the_head(tmp_path: Path) -> None:
    head = fake.make_host(4, tmp_path / "head", env=pod_env(worker="0"))
    other = fake.make_host(4, tmp_path / "other", env=pod_env(worker="1"))
    chips = detect(head)[0]
    assert MANAGER.additional_resources(chips, head) == {"slice-a": 1.0, "TPU-v6e-16-head": 1.0}
    assert MANAGER.additional_resources(chips, other) == {"slice-a": 1.0}


@pytest.mark.parametrize(
    "env",
    [{}, pod_env() | {"TPU_NAME": " "}, pod_env(worker="x"), pod_env(accelerator_type="banana")],
    ids=["no-pod", "no-name", "bad-worker", "bad-type"],
)
def test_no_slice_resources_without_the_whole_pod_description(env: dict[str, str]) -> None:
    host = FakeHost(env=env)
    assert MANAGER.additional_resources([accelkit.Device("0")], host) == {}


def test_no_slice_resources_on_a_host_without_chips() -> None:
    assert MANAGER.additional_resources([], FakeHost(env=pod_env())) == {}


def test_ironwood_spelling_reads_as_v7x() -> None:
    host = FakeHost(env=pod_env(accelerator_type="tpu7x-16"))
    chips = [accelkit.Device(str(n)) for n in range(4)]
    assert "TPU-v7x-16-head" in MANAGER.additional_resources(chips, host)
    assert MANAGER.labels(chips, host)["pod-type"] == "v7x-16"


def test_labels_describe_the_host_and_its_slice() -> None:
    chips = [accelkit.Device(str(n)) for n in range(4)]
    assert MANAGER.labels(chips, FakeHost(env=pod_env(worker="3"))) == {
        "chips-per-host": "4",
        "pod-type": "v6e-16",
        "chips-per-pod": "16",
        "topology": "4x4",
        "worker-id": "3",
        "slice-name": "slice-a",
    }
    assert MANAGER.labels([], FakeHost(env=pod_env())) == {}


@pytest.mark.parametrize(
    ("pod_type", "chips"),
    [("v6e-16", "16"), ("v5litepod-8", "8"), ("v4-16", "8"), ("v5p-8", "4"), ("tpu7x-16", "8")],
)
def test_chips_per_pod_follows_what_the_suffix_counts(pod_type: str, chips: str) -> None:
    labels = MANAGER.labels(
        [accelkit.Device("0")], FakeHost(env={"TPU_ACCELERATOR_TYPE": pod_type})
    )
    assert labels["chips-per-pod"] == chips


def test_a_malformed_pod_type_is_a_note_not_a_label(tmp_path: Path) -> None:
    host = fake.make_host(1, tmp_path, env={"TPU_ACCELERATOR_TYPE": "v6e"})
    devices, notes = detect(host)
    assert devices[0].type_label == "TPU-V6E"
    assert any("not a pod type" in n for n in notes)
    assert "pod-type" not in MANAGER.labels(devices, host)


@given(st.text(max_size=40))
def test_any_accelerator_type_text_is_read_without_raising(text: str) -> None:
    host = FakeHost(env={"TPU_ACCELERATOR_TYPE": text, "TPU_NAME": "s", "TPU_WORKER_ID": "0"})
    resources = MANAGER.additional_resources([accelkit.Device("0")], host)
    assert resources == {} or (resources["s"] == 1.0 and len(resources) == 2)


def test_every_generation_detection_names_has_slice_shapes() -> None:
    from accelkit_plugins.tpu import GENERATIONS, V2_V3_SUBSYSTEMS
    from accelkit_plugins.tpu.generations import TPU_GENERATIONS

    assert {*GENERATIONS.values(), *V2_V3_SUBSYSTEMS.values()} == set(TPU_GENERATIONS)


def test_the_manager_shapes_slices_for_training_plans() -> None:
    found = MANAGER.slice_shape("TPU-V6E", "4x4")
    assert (found.chips, found.chips_per_host, found.hosts) == (16, 4, 4)
    assert found.head_resource == "TPU-v6e-16-head"
    with pytest.raises(ValueError, match="v6e has no topology '3x3'"):
        MANAGER.slice_shape("v6e", "3x3")


@pytest.mark.parametrize("generation", ["v2", "v3", "v4", "v5p", "v5litepod", "v6e", "v7x"])
def test_a_slice_names_the_type_label_its_hosts_chips_carry(
    generation: str, tmp_path: Path
) -> None:
    """Training plans ask for ``accelerator_type:<type_label>``: the label a host of the slice
    gives its chips, so the demand lands on the slice's hosts, whatever the user spelled."""
    from accelkit_plugins.tpu.generations import TPU_GENERATIONS

    topology = "2x2" if TPU_GENERATIONS[generation].dimensions == 2 else "2x2x1"
    host = fake.make_host(4, tmp_path, env={"TPU_ACCELERATOR_TYPE": f"{generation}-8"})
    devices, _ = detect(host)
    assert MANAGER.slice_shape(generation, topology).type_label == devices[0].type_label
    assert MANAGER.slice_shape("trillium", "4x4").type_label == "TPU-V6E"


# -- the whole node --------------------------------------------------------------------------


def test_detect_node_on_a_pod_host(tmp_path: Path) -> None:
    node = accelkit.detect_node(fake.make_host(4, tmp_path, env=pod_env()))
    assert node.resources["TPU"] == 4.0
    assert node.resources["accelerator_type:TPU-V6E"] == 1.0
    assert node.resources["slice-a"] == node.resources["TPU-v6e-16-head"] == 1.0
    assert node.labels["accelkit/tpu.pod-type"] == "v6e-16"


def test_snapshot_v6e_8() -> None:
    host = load_snapshot(SNAPSHOT)
    devices, _ = detect(host)
    assert [d.id for d in devices] == [str(n) for n in range(8)]
    assert {d.type_label for d in devices} == {"TPU-V6E"}
    node = accelkit.detect_node(host)
    assert node.resources["TPU"] == 8.0
    assert node.resources["accelerator_type:TPU-V6E"] == 1.0
    assert node.resources["TPU-v6e-8-head"] == 1.0
    assert node.labels["accelkit/tpu.chips-per-host"] == "8"
    assert node.labels["accelkit/tpu.topology"] == "2x4"
