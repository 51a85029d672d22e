"""AMD on 2025-2026 hardware: compute partitions (DPX/QPX/CPX), virtual functions, and Ryzen
integrated GPUs beside a discrete one."""

from __future__ import annotations

import dataclasses
import json
import pathlib
from typing import Any, Callable

import accelkit
import pytest
from accelkit.testing.fakes import amd as fake
from accelkit.testing.fakes.amdsmi_c import emulated_amdsmi
from accelkit_plugins.amd import AmdManager, gpu
from accelkit_plugins.amd import testing as amd_hosts
from accelkit_plugins.amd.kfd import kfd_bus_id, kfd_gpu_nodes

MANAGER = AmdManager()
MIB = fake.MIB
CARD_MIB = 196592  # an MI300X's VRAM, which sysfs gives in every partition mode


LAYOUTS = {"function bits": 0, "bits 31:28": 28}
"""Where a kernel puts a partition's index in its KFD location_id (``write_sysfs``): the function
bits (kfd_topology.c since MI300 support), or bits 31:28 (a variant posted and reverted), under
which every partition reads as the card's bus id."""


def partitioned(
    root: pathlib.Path,
    mode: str,
    count: int,
    *,
    shared_id: bool = False,
    spx_card: bool = True,
    layout: str = "function bits",
) -> accelkit.FakeHost:
    """One MI300X split into ``count`` partitions in ``mode`` (each its own KFD node, its share
    of the VRAM in its ``mem_banks``), and a second MI300X whole (SPX)."""
    card, whole = fake.fake_amdgpus(2)
    parts = fake.partitions_of(card, count, shared_id=shared_id)
    gpus = [*parts, *([whole] if spx_card else [])]
    amd_hosts.write_sysfs(root, gpus, partition_shift=LAYOUTS[layout])
    amd_hosts.write_partition_mode(root, card.bus_id, mode, CARD_MIB)
    if spx_card:
        amd_hosts.write_partition_mode(root, whole.bus_id, "SPX", CARD_MIB)
    return accelkit.FakeHost(root=root)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(("mode", "count"), [("DPX", 2), ("QPX", 4), ("CPX", 8)])
def test_each_partition_is_a_gpu_with_its_id_memory_uuid_and_mode(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any], mode: str, count: int, layout: str
) -> None:
    """Partition n of card 0000:05:00.0 is KFD's 0000:05:00.n, no PCI function: the mode and
    NUMA node are the card's, read from the card's sysfs; each is on the card's bus id."""
    devices, notes = run_detect(MANAGER, partitioned(tmp_path, mode, count, layout=layout))
    parts, whole = devices[:count], devices[count]
    card = fake.fake_amdgpus(1)[0]
    assert [d.id for d in devices] == [str(n) for n in range(count + 1)]
    assert {d.type_label for d in parts} == {f"AMD-Instinct-MI300X-OAM-{mode}"}
    assert [d.memory_bytes for d in parts] == [CARD_MIB // count * MIB] * count  # KFD mem_banks
    assert len({d.uuid for d in parts}) == count and None not in {d.uuid for d in parts}
    assert [(d.pci_bus_id, d.numa_node) for d in parts] == [(card.bus_id, card.numa_node)] * count
    assert (whole.type_label, whole.memory_bytes) == ("AMD-Instinct-MI300X-OAM", CARD_MIB * MIB)
    assert "warning" not in notes


def test_separate_gpus_on_one_slot_stay_separate(tmp_path: pathlib.Path) -> None:
    """Two GPUs that are two PCI functions of one slot (SR-IOV functions, or a VM given them as
    one multi-function device) are not one partitioned card: each is a PCI function of its own,
    with its own bus id, NUMA node and type, through every layer."""
    gpus = [
        fake.FakeAmdGpu(bus_id=f"0000:c1:00.{n}", serial=0x2000 + n, device_id=0x74B5, numa_node=n)
        for n in (1, 2)
    ]
    amd_hosts.write_sysfs(tmp_path, gpus)
    commands = {
        amd_hosts.AMD_SMI_LIST_ARGV: (0, amd_hosts.amd_smi_list_output(gpus)),
        amd_hosts.AMD_SMI_STATIC_ARGV: (0, amd_hosts.amd_smi_static_output(gpus)),
    }
    library = accelkit.FakeHost(root=tmp_path, modules={"amdsmi": fake.fake_amdsmi(gpus)})
    tool = accelkit.FakeHost(root=tmp_path, commands=commands)
    for host in (library, tool, accelkit.FakeHost(root=tmp_path)):
        node = accelkit.detect_node(host)
        seen = [(d.pci_bus_id, d.numa_node, d.type_label) for d in node.devices]
        assert seen == [
            ("0000:c1:00.1", 1, "AMD-Instinct-MI300X-OAM"),
            ("0000:c1:00.2", 2, "AMD-Instinct-MI300X-OAM"),
        ]
        messages = " ".join(d.message for d in node.diagnostics)
        assert "partition" not in messages and "PCI card" not in messages


def test_a_cpx_node_offers_64_gpus_of_its_type(tmp_path: pathlib.Path) -> None:
    root = tmp_path
    cards = fake.fake_amdgpus(8)
    amd_hosts.write_sysfs(root, [p for card in cards for p in fake.partitions_of(card, 8)])
    for card in cards:
        amd_hosts.write_partition_mode(root, card.bus_id, "CPX", CARD_MIB)
    node = accelkit.detect_node(accelkit.FakeHost(root=root))
    assert node.resources == {"GPU": 64.0, "accelerator_type:AMD-Instinct-MI300X-OAM-CPX": 1.0}
    assert {d.memory_bytes for d in node.devices} == {CARD_MIB // 8 * MIB}
    assert "64 devices on 8 PCI card(s)" in " ".join(d.message for d in node.diagnostics)
    grant = accelkit.Allocator(node).acquire({"GPU": 1})
    assert grant is not None
    assert grant.env({}, hooks=False)["ROCR_VISIBLE_DEVICES"] == "0"


def test_partitions_that_share_one_unique_id_have_no_uuid(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    devices, notes = run_detect(MANAGER, partitioned(tmp_path, "CPX", 8, shared_id=True))
    assert [d.uuid for d in devices[:8]] == [None] * 8
    assert devices[8].uuid is not None
    assert "share one unique id (ROCm before 7.0)" in notes


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_split_card_whose_mode_cannot_be_read_is_still_told_apart(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any], layout: str
) -> None:
    host = partitioned(tmp_path, "CPX", 4, spx_card=False, layout=layout)
    card = fake.fake_amdgpus(1)[0]
    (tmp_path / "sys/bus/pci/devices" / card.bus_id / "current_compute_partition").unlink()
    devices, notes = run_detect(MANAGER, host)
    assert [d.type_label for d in devices] == ["AMD-Instinct-MI300X-OAM-XCP"] * 4
    assert f"warning: GPU {card.bus_id} is split into 4 partitions" in notes


def test_every_layer_tells_a_partitioned_card_alike(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any], amdsmi_dir: pathlib.Path
) -> None:
    """amdsmi (a processor per partition, each BDF with the partition in its function bits, the
    card's whole VRAM each, in its own order) and amd-smi give what KFD gives: ids in KFD order,
    each partition's memory from its KFD node, the mode, the card's bus id."""
    card, whole = fake.fake_amdgpus(2)
    gpus = [*fake.partitions_of(card, 4), whole]
    partitioned(tmp_path, "QPX", 4)
    smi = emulated_amdsmi(gpus, package_dir=amdsmi_dir, handle_order=[4, 3, 1, 0, 2])
    commands = {
        amd_hosts.AMD_SMI_LIST_ARGV: (0, amd_hosts.amd_smi_list_output(gpus[::-1])),
        amd_hosts.AMD_SMI_STATIC_ARGV: (0, amd_hosts.amd_smi_static_output(gpus[::-1])),
    }
    by_kfd, _ = run_detect(MANAGER, accelkit.FakeHost(root=tmp_path))
    by_smi, _ = run_detect(MANAGER, accelkit.FakeHost(root=tmp_path, modules={"amdsmi": smi}))
    by_cli, _ = run_detect(MANAGER, accelkit.FakeHost(root=tmp_path, commands=commands))
    assert [d.source for d in by_kfd + by_smi + by_cli] == ["sysfs"] * 5 + ["library"] * 5 + [
        "command"
    ] * 5
    told = [d.replace(source="", model=None) for d in by_kfd]
    assert [d.replace(source="", model=None) for d in by_smi] == told
    assert [d.replace(source="", model=None) for d in by_cli] == told
    assert [(d.type_label, d.memory_bytes, d.pci_bus_id) for d in told] == [
        ("AMD-Instinct-MI300X-OAM-QPX", CARD_MIB // 4 * MIB, card.bus_id)
    ] * 4 + [("AMD-Instinct-MI300X-OAM", CARD_MIB * MIB, whole.bus_id)]
    assert [d.uuid for d in told] == [g.rocr_uuid for g in gpus]


def test_amdsmi_partitions_on_the_cards_bus_id_take_their_facts_from_kfd(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    """Under the bits-31:28 variant KFD and amdsmi give every partition the card's bus id."""
    partitioned(tmp_path, "QPX", 4, spx_card=False, layout="bits 31:28")
    card = fake.fake_amdgpus(1)[0]
    listed = [dataclasses.replace(p, partition=0) for p in fake.partitions_of(card, 4)]
    smi = accelkit.FakeHost(root=tmp_path, modules={"amdsmi": fake.fake_amdsmi(listed)})
    devices, _ = run_detect(MANAGER, smi)
    assert [(d.source, d.type_label, d.pci_bus_id) for d in devices] == [
        ("library", "AMD-Instinct-MI300X-OAM-QPX", card.bus_id)
    ] * 4
    assert {d.memory_bytes for d in devices} == {CARD_MIB // 4 * MIB}
    assert len({d.uuid for d in devices}) == 4


@pytest.mark.parametrize(("shift", "bits"), [(0, [0, 1, 2, 3]), (28, [0, 0, 0, 0])])
def test_the_fake_sysfs_lays_out_partitions_as_amdgpu_does(
    tmp_path: pathlib.Path, shift: int, bits: list[int]
) -> None:
    """Partition n's KFD location_id is the card's PCI id with n OR-ed in (function bits, or bits
    31:28 in the reverted variant); only the card is a PCI function; the other partitions' DRM
    nodes belong to amdgpu_xcp platform devices; amd-smi lists each partition's own BDF."""
    card = fake.fake_amdgpus(1)[0]
    parts = fake.partitions_of(card, 4)
    amd_hosts.write_sysfs(tmp_path, parts, partition_shift=shift)
    host = accelkit.FakeHost(root=tmp_path)
    nodes = kfd_gpu_nodes(host) or []
    assert [n["location_id"] for n in nodes] == [0x0500 | n << shift for n in range(4)]
    assert [kfd_bus_id(n) for n in nodes] == [f"0000:05:00.{n}" for n in bits]
    assert host.listdir("/sys/bus/pci/devices") == [card.bus_id]
    assert [host.realpath(f"/sys/class/drm/renderD{128 + n}/device") for n in range(4)] == [
        f"/sys/bus/pci/devices/{card.bus_id}",
        *(f"/sys/devices/platform/amdgpu_xcp.{n}" for n in range(3)),
    ]
    listed = json.loads(amd_hosts.amd_smi_list_output(parts))
    assert [(r["bdf"], r["partition_id"]) for r in listed] == [(p.bdf, p.partition) for p in parts]
    assert [p.bdf for p in parts] == [f"0000:05:00.{n}" for n in range(4)]
    static = json.loads(amd_hosts.amd_smi_static_output(parts))
    assert {r["vram"]["size"]["value"] for r in static} == {CARD_MIB}  # the whole card's


@pytest.mark.parametrize(
    ("device_id", "label"),
    [
        ("0x74b5", "AMD-Instinct-MI300X-OAM"),
        ("0x74b9", "AMD-Instinct-MI325X-OAM"),
        ("0x74bd", "AMD-Instinct-MI300X-HF"),
    ],
)
def test_virtual_functions_are_labelled_as_their_product(device_id: str, label: str) -> None:
    device = gpu(accelkit.FakeHost(), 0, {"device_id": device_id, "market_name": "N/A"}, None)
    assert device.type_label == label


def test_a_vm_with_virtual_functions_offers_them(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    amd_hosts.write_sysfs(tmp_path, fake.fake_amdgpus(2, device_id=0x74B5))
    devices, _ = run_detect(MANAGER, accelkit.FakeHost(root=tmp_path))
    assert [(d.id, d.type_label) for d in devices] == [
        ("0", "AMD-Instinct-MI300X-OAM"),
        ("1", "AMD-Instinct-MI300X-OAM"),
    ]


def test_a_ryzen_igpu_beside_a_discrete_gpu_is_not_offered_and_keeps_its_ordinal(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    first, second = fake.fake_amdgpus(2, device_id=0x7550)  # Radeon RX 9070 XT
    raphael = fake.FakeAmdGpu(
        "0000:12:00.0", 0, "AMD Radeon Graphics", device_id=0x164E, vram_mib=512, simd_count=8
    )
    amd_hosts.write_sysfs(tmp_path, [first, raphael, second])  # KFD order: as ROCr counts them
    devices, notes = run_detect(MANAGER, accelkit.FakeHost(root=tmp_path))
    # ROCR_VISIBLE_DEVICES=1 would be the iGPU: it keeps its ordinal, and is not offered
    assert [(d.id, d.offered) for d in devices] == [("0", True), ("1", False), ("2", True)]
    assert "info: GPU 1 (AMD-Radeon-Raphael-iGPU) is an integrated GPU ROCm does not" in notes
    node = accelkit.detect_node(accelkit.FakeHost(root=tmp_path))
    assert node.resources["GPU"] == 2.0
    assert node.detected == {"amd": 3}  # a grant of both GPUs is not a grant of the whole host
    grants = [accelkit.Allocator(node).acquire({"GPU": 2})]
    assert grants[0] is not None
    assert grants[0].env({}, hooks=False)["ROCR_VISIBLE_DEVICES"] == "0,2"


@pytest.mark.parametrize(
    ("value", "offered"),
    [
        ("0,1,2", [("0", 0), ("2", 2)]),  # ROCr reads on past the iGPU, which keeps ordinal 1
        ("1,2", [("2", 1)]),
        ("1", []),  # only the iGPU: nothing offered, and no stand-in GPU made of the value
    ],
)
def test_rocr_visible_devices_naming_the_igpu_reads_on_past_it(
    tmp_path: pathlib.Path, value: str, offered: list[tuple[str, int]]
) -> None:
    first, second = fake.fake_amdgpus(2, device_id=0x7550)
    raphael = fake.FakeAmdGpu(
        "0000:12:00.0", 0, "AMD Radeon Graphics", device_id=0x164E, vram_mib=512, simd_count=8
    )
    amd_hosts.write_sysfs(tmp_path, [first, raphael, second])
    host = accelkit.FakeHost(root=tmp_path, env={"ROCR_VISIBLE_DEVICES": value})
    node = accelkit.detect_node(host)
    assert [(d.id, d.index) for d in node.devices] == offered
    assert not [
        d for d in node.diagnostics if d.family == "amd" and d.level != "info"
    ]  # nothing cut short
