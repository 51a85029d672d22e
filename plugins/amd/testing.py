"""Fake AMD hosts, modelled on an 8-GPU MI300X node.

:func:`make_host` tells the same GPUs through amdsmi (the kit's
:func:`~accelkit.testing.fake_amdsmi`), ``amd-smi``'s JSON and sysfs. The sysfs writer lays
out what the amdgpu driver shows: KFD topology nodes (CPU nodes with ``simd_count 0`` first), a
DRM ``card<N>`` and ``renderD<N>`` per GPU, and each card's PCI function with its NUMA node and
VRAM size; a card split into compute partitions as :func:`write_sysfs` says.

``make_host`` is this family's backdoor for the conformance kit, declared in the entry-point
group ``accelkit.testing`` (in accelkit's ``pyproject.toml``) as a third-party plugin declares
its own.
"""

from __future__ import annotations

import json
import os
import pathlib
from collections.abc import Sequence

from accelkit import FakeHost
from accelkit.testing import FakeAmdGpu, fake_amdgpus, fake_amdsmi

__all__ = [
    "AMD_SMI_LIST_ARGV",
    "AMD_SMI_STATIC_ARGV",
    "amd_smi_list_output",
    "amd_smi_static_output",
    "make_host",
    "write_partition_mode",
    "write_sysfs",
]

MIB = 1 << 20
AMD_SMI_LIST_ARGV = ("amd-smi", "list", "--json")
AMD_SMI_STATIC_ARGV = ("amd-smi", "static", "--asic", "--vram", "--json")


def amd_smi_list_output(gpus: Sequence[FakeAmdGpu]) -> str:
    """``amd-smi list --json`` as ROCm 6.x prints it (KFD node 0 and 1 are the CPUs)."""
    return json.dumps(
        [
            {
                "gpu": index,
                "bdf": gpu.bdf,
                "uuid": f"{gpu.device_id & 0xFF:02x}ff{gpu.device_id:04x}-0000-1000-8000-"
                f"{gpu.serial & 0xFFFFFFFFFFFF:012x}",
                "kfd_id": 10000 + index,
                "node_id": index + 2,
                "partition_id": gpu.partition,
            }
            for index, gpu in enumerate(gpus)
        ],
        indent=4,
    )


def amd_smi_static_output(gpus: Sequence[FakeAmdGpu]) -> str:
    """``amd-smi static --asic --vram --json`` as ROCm 6.1+ prints it (VRAM size as value/unit;
    amdsmi's, so a partition's is its whole card's)."""
    module = fake_amdsmi(gpus)
    module.amdsmi_init()
    records = [
        {
            "gpu": index,
            "asic": module.amdsmi_get_gpu_asic_info(index),
            "vram": {
                "type": "HBM",
                "vendor": "SAMSUNG",
                "size": {
                    "value": module.amdsmi_get_gpu_vram_info(index)["vram_size"],
                    "unit": "MB",
                },
                "bit_width": 8192,
            },
        }
        for index in range(len(gpus))
    ]
    return json.dumps(records, indent=4)


def write_sysfs(
    root: pathlib.Path, gpus: Sequence[FakeAmdGpu], cpu_nodes: int = 2, *, partition_shift: int = 0
) -> None:
    """KFD topology (each GPU node's VRAM in its ``mem_banks``), DRM card and render nodes, and
    PCI functions of ``gpus``.

    The compute partitions of a card (:func:`~accelkit.testing.fakes.amd.partitions_of`) are
    laid out as amdgpu lays them out: a KFD node each, whose ``location_id`` is the card's PCI
    id with the partition's index OR-ed in at bit ``partition_shift``: 0, the function bits, as
    kfd_topology.c does (``location_id |= node_id``); 28 is a variant that was posted and
    reverted, under which every partition reads as the card's own bus id. Only the card is a
    PCI function (partition 0 writes it); the other partitions' DRM nodes belong to platform
    devices ``/sys/devices/platform/amdgpu_xcp.<n>``, which have no PCI attributes.
    """
    nodes = root / "sys/class/kfd/kfd/topology/nodes"
    for number in range(cpu_nodes):
        (nodes / str(number)).mkdir(parents=True, exist_ok=True)
        (nodes / str(number) / "properties").write_text(
            "cpu_cores_count 96\nsimd_count 0\nvendor_id 0\ndevice_id 0\nlocation_id 0\n"
            f"domain 0\nunique_id 0\nnuma_node {number}\n"
        )
    drm = root / "sys/class/drm"
    drm.mkdir(parents=True, exist_ok=True)
    secondary = 0  # amdgpu_xcp.<n> count the secondary partitions of every card
    for index, gpu in enumerate(gpus):
        _write_kfd_node(nodes / str(cpu_nodes + index), gpu, partition_shift)
        if gpu.partition == 0:
            _write_pci_function(root, gpu)
            device = f"/sys/bus/pci/devices/{gpu.bus_id}"
        else:
            device = f"/sys/devices/platform/amdgpu_xcp.{secondary}"
            (root / device.lstrip("/")).mkdir(parents=True, exist_ok=True)
            secondary += 1
        for entry in (f"card{index + 1}", f"renderD{128 + index}"):
            (drm / entry).mkdir(exist_ok=True)
            if not (drm / entry / "device").is_symlink():
                os.symlink(device, drm / entry / "device")


def _write_kfd_node(node: pathlib.Path, gpu: FakeAmdGpu, partition_shift: int = 0) -> None:
    """A GPU's KFD topology node: ``properties`` and one frame-buffer bank of its VRAM."""
    domain, bus, rest = gpu.bus_id.split(":")
    slot, function = rest.split(".")
    card = int(bus, 16) << 8 | int(slot, 16) << 3 | int(function)  # pci_dev_id(pdev)
    location = card | gpu.partition << partition_shift
    node.mkdir(parents=True, exist_ok=True)
    (node / "properties").write_text(
        f"cpu_cores_count 0\nsimd_count {gpu.simd_count}\nvendor_id 4098\n"
        f"device_id {gpu.device_id}\nlocation_id {location}\ndomain {int(domain, 16)}\n"
        f"unique_id {gpu.serial}\nnuma_node {gpu.numa_node}\ngfx_target_version 90402\n"
    )
    bank = node / "mem_banks/0"
    bank.mkdir(parents=True, exist_ok=True)
    (bank / "properties").write_text(
        f"heap_type 1\nsize_in_bytes {gpu.vram_mib * MIB}\nflags 0\nwidth 8192\nmem_clk_max 2600\n"
    )


def _write_pci_function(root: pathlib.Path, gpu: FakeAmdGpu) -> None:
    """A card's PCI function: ids, class, NUMA node, VRAM size, bound to amdgpu."""
    pci = root / "sys/bus/pci/devices" / gpu.bus_id
    pci.mkdir(parents=True, exist_ok=True)
    for name, value in (
        ("vendor", "0x1002"),
        ("device", f"{gpu.device_id:#06x}"),
        ("class", "0x120000"),
        ("numa_node", str(gpu.numa_node)),
        ("mem_info_vram_total", str(gpu.vram_mib * MIB)),
    ):
        (pci / name).write_text(value + "\n")
    if not (pci / "driver").is_symlink():
        os.symlink("../../../bus/pci/drivers/amdgpu", pci / "driver")


def write_partition_mode(root: pathlib.Path, bus_id: str, mode: str, vram_mib: int) -> None:
    """A card's ``current_compute_partition`` (``"CPX"``) and its whole VRAM, which the driver's
    ``mem_info_vram_total`` keeps giving in every partition mode."""
    pci = root / "sys/bus/pci/devices" / bus_id
    pci.mkdir(parents=True, exist_ok=True)
    (pci / "current_compute_partition").write_text(f"{mode}\n")
    (pci / "mem_info_vram_total").write_text(f"{vram_mib * MIB}\n")


def make_host(count: int, root: pathlib.Path) -> FakeHost:
    """A host with ``count`` MI300X GPUs, told the same way by amdsmi, amd-smi and sysfs."""
    gpus = fake_amdgpus(count)
    write_sysfs(root, gpus)
    return FakeHost(
        root=os.fspath(root),
        commands={
            AMD_SMI_LIST_ARGV: (0, amd_smi_list_output(gpus)),
            AMD_SMI_STATIC_ARGV: (0, amd_smi_static_output(gpus)),
        },
        modules={"amdsmi": fake_amdsmi(gpus)},
    )
