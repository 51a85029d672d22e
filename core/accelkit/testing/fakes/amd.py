"""Fake AMD hosts and a fake ``amdsmi``, modelled on an 8-GPU MI300X node.

:func:`fake_amdsmi` builds a module that answers the amdsmi calls accelkit makes (the
conformance kit re-exports it for plugin authors): every call before ``amdsmi_init`` fails and
``amdsmi_shut_down`` is counted. The sysfs writers lay out what the amdgpu driver shows: KFD
topology nodes (CPU nodes with ``simd_count 0`` first), a DRM ``card<N>`` and ``renderD<N>`` per
GPU, and each GPU's PCI function with its NUMA node and VRAM size.
"""

from __future__ import annotations

import json
import os
import pathlib
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from accelkit.host._host import FakeHost
from accelkit.testing.fakes._library import LibrarySession

__all__ = [
    "AMDSMI_STATUS_NOT_INIT",
    "AMDSMI_STATUS_NOT_SUPPORTED",
    "AMD_SMI_LIST_ARGV",
    "AMD_SMI_STATIC_ARGV",
    "BUS_IDS",
    "MIB",
    "AmdSmiException",
    "AmdSmiLibraryException",
    "FakeAmdGpu",
    "amd_smi_list_output",
    "amd_smi_static_output",
    "fake_amdgpus",
    "fake_amdsmi",
    "make_host",
    "write_sysfs",
]

MIB = 1 << 20
AMD_SMI_LIST_ARGV = ("amd-smi", "list", "--json")
AMD_SMI_STATIC_ARGV = ("amd-smi", "static", "--asic", "--vram", "--json")

BUS_IDS = (
    "0000:05:00.0",
    "0000:26:00.0",
    "0000:46:00.0",
    "0000:65:00.0",
    "0000:85:00.0",
    "0000:a6:00.0",
    "0000:c6:00.0",
    "0000:e5:00.0",
)
"""PCI addresses of the eight OAM modules of the modelled board, in bus (KFD) order."""


@dataclass(frozen=True)
class FakeAmdGpu:
    """One GPU as amdsmi, amd-smi and sysfs show it."""

    bus_id: str
    serial: int
    market_name: str = "AMD Instinct MI300X"
    device_id: int = 0x74A1
    vram_mib: int = 196592
    simd_count: int = 1216
    numa_node: int = 0

    @property
    def rocr_uuid(self) -> str:
        """The id ROCr gives the GPU (``GPU-`` and the KFD ``unique_id`` in hex)."""
        return f"GPU-{self.serial:016x}"


def fake_amdgpus(count: int, device_id: int = 0x74A1) -> list[FakeAmdGpu]:
    """``count`` GPUs (up to 8) in bus order; the upper half on NUMA node 1."""
    if not 0 <= count <= len(BUS_IDS):
        raise ValueError(f"the modelled board has 0 to {len(BUS_IDS)} GPUs, not {count}")
    return [
        FakeAmdGpu(
            bus_id=BUS_IDS[index],
            serial=0x1000_0000_0000_0000 + index,
            device_id=device_id,
            numa_node=index * 2 // len(BUS_IDS),
        )
        for index in range(count)
    ]


AMDSMI_STATUS_NOT_SUPPORTED = 2
AMDSMI_STATUS_NOT_INIT = 32
_STATUS_TEXT = {
    AMDSMI_STATUS_NOT_SUPPORTED: "AMDSMI_STATUS_NOT_SUPPORTED - Feature not supported",
    AMDSMI_STATUS_NOT_INIT: "AMDSMI_STATUS_NOT_INIT - Device not initialized",
}


class AmdSmiException(Exception):
    """The base of amdsmi's errors, as the real package names it."""


class AmdSmiLibraryException(AmdSmiException):
    """A status other than success from the C library, shaped as the real package's: built from
    the status code, kept as ``err_code``, read as "Error code: ... | AMDSMI_STATUS_..."."""

    def __init__(self, err_code: int) -> None:
        super().__init__(abs(err_code))
        self.err_code = abs(err_code)
        self.err_info = _STATUS_TEXT.get(self.err_code, "AMDSMI_STATUS_UNKNOWN_ERROR")

    def get_error_code(self) -> int:
        """The status code, as the real exception gives it."""
        return self.err_code

    def __str__(self) -> str:
        return f"Error code:\n\t{self.err_code} | {self.err_info}"


def fake_amdsmi(gpus: Sequence[FakeAmdGpu]) -> ModuleType:
    """A module standing in for ``amdsmi`` over ``gpus``, in amd-smi's GPU order.

    ``calls["amdsmi_init"]`` and ``calls["amdsmi_shut_down"]`` count the session; tests may
    replace any function to make a call fail, raising ``AmdSmiLibraryException(status)`` as the
    real package does. Where the real package is installed,
    :func:`accelkit.testing.fakes.amdsmi_c.emulated_amdsmi` runs it instead.
    """
    module = ModuleType("amdsmi")
    session = LibrarySession(
        "amdsmi_init", "amdsmi_shut_down", lambda: AmdSmiLibraryException(AMDSMI_STATUS_NOT_INIT)
    )

    def gpu(handle: Any) -> FakeAmdGpu:
        session.require()
        return gpus[int(handle)]

    def handles() -> list[int]:
        session.require()
        return list(range(len(gpus)))

    def asic_info(handle: Any) -> dict[str, Any]:
        card = gpu(handle)
        return {
            "market_name": card.market_name,
            "vendor_id": "0x1002",
            "vendor_name": "Advanced Micro Devices Inc. [AMD/ATI]",
            "subvendor_id": "0x1002",
            "device_id": f"{card.device_id:#x}",
            "rev_id": "0x00",
            "asic_serial": f"0x{card.serial:016X}",
            "oam_id": gpus.index(card),
            "num_compute_units": card.simd_count // 4,
            "target_graphics_version": "gfx942",
        }

    module.__dict__.update(
        AmdSmiException=AmdSmiException,
        AmdSmiLibraryException=AmdSmiLibraryException,
        calls=session.calls,
        amdsmi_init=session.init,
        amdsmi_shut_down=session.shutdown,
        amdsmi_get_processor_handles=handles,
        amdsmi_get_gpu_asic_info=asic_info,
        amdsmi_get_gpu_device_bdf=lambda h: gpu(h).bus_id,
        amdsmi_get_gpu_device_uuid=lambda h: (
            f"{gpu(h).device_id:04x}ff-0000-1000-8000-000000000000"
        ),
        amdsmi_get_gpu_vram_info=lambda h: {
            "vram_type": 9,
            "vram_vendor": "SAMSUNG",
            "vram_size": gpu(h).vram_mib,
            "vram_bit_width": 8192,
        },
    )
    return module


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
    """KFD topology, DRM card and render nodes, and PCI functions of ``gpus``."""
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
