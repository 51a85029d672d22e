"""Fake AMD hosts, modelled on an 8-GPU MI300X node.

:func:`make_host` tells the same GPUs through amdsmi (the kit's
:func:`~accelkit.testing.fake_amdsmi`), ``amd-smi``'s JSON and sysfs. The sysfs writer lays
out what the amdgpu driver shows: KFD topology nodes (CPU nodes with ``simd_count 0`` first), a
DRM ``card<N>`` and ``renderD<N>`` per GPU, and each GPU's PCI function with its NUMA node and
VRAM size.

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
                "bdf": gpu.bus_id,
                "uuid": f"{gpu.device_id & 0xFF:02x}ff{gpu.device_id:04x}-0000-1000-8000-"
                f"{gpu.serial & 0xFFFFFFFFFFFF:012x}",
                "kfd_id": 10000 + index,
                "node_id": index + 2,
                "partition_id": 0,
            }
            for index, gpu in enumerate(gpus)
        ],
        indent=4,
    )


def amd_smi_static_output(gpus: Sequence[FakeAmdGpu]) -> str:
    """``amd-smi static --asic --vram --json`` as ROCm 6.1+ prints it (VRAM size as value/unit)."""
    module = fake_amdsmi(gpus)
    module.amdsmi_init()
    records = [
        {
            "gpu": index,
            "asic": module.amdsmi_get_gpu_asic_info(index),
            "vram": {
                "type": "HBM",
                "vendor": "SAMSUNG",
                "size": {"value": gpu.vram_mib, "unit": "MB"},
                "bit_width": 8192,
            },
        }
        for index, gpu in enumerate(gpus)
    ]
    return json.dumps(records, indent=4)


def write_sysfs(root: pathlib.Path, gpus: Sequence[FakeAmdGpu], cpu_nodes: int = 2) -> None:
    """KFD topology (each GPU node's VRAM in its ``mem_banks``), DRM card and render nodes, and
    PCI functions of ``gpus``. Compute partitions of one card are ``gpus`` sharing a bus id."""
    nodes = root / "sys/class/kfd/kfd/topology/nodes"
    for number in range(cpu_nodes):
        (nodes / str(number)).mkdir(parents=True, exist_ok=True)
        (nodes / str(number) / "properties").write_text(
            "cpu_cores_count 96\nsimd_count 0\nvendor_id 0\ndevice_id 0\nlocation_id 0\n"
            f"domain 0\nunique_id 0\nnuma_node {number}\n"
        )
    drm = root / "sys/class/drm"
    drm.mkdir(parents=True, exist_ok=True)
    for index, gpu in enumerate(gpus):
        node = nodes / str(cpu_nodes + index)
        node.mkdir(parents=True, exist_ok=True)
        domain, bus, rest = gpu.bus_id.split(":")
        slot, function = rest.split(".")
        location = int(bus, 16) << 8 | int(slot, 16) << 3 | int(function)
        (node / "properties").write_text(
            f"cpu_cores_count 0\nsimd_count {gpu.simd_count}\nvendor_id 4098\n"
            f"device_id {gpu.device_id}\nlocation_id {location}\ndomain {int(domain, 16)}\n"
            f"unique_id {gpu.serial}\nnuma_node {gpu.numa_node}\ngfx_target_version 90402\n"
        )
        bank = node / "mem_banks/0"
        bank.mkdir(parents=True, exist_ok=True)
        (bank / "properties").write_text(
            f"heap_type 1\nsize_in_bytes {gpu.vram_mib * MIB}\nflags 0\nwidth 8192\n"
            "mem_clk_max 2600\n"
        )
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
        for entry in (f"card{index + 1}", f"renderD{128 + index}"):
            (drm / entry).mkdir(exist_ok=True)
            if not (drm / entry / "device").is_symlink():
                os.symlink(f"/sys/bus/pci/devices/{gpu.bus_id}", drm / entry / "device")


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
