"""A fake ``amdsmi`` over GPUs modelled on an 8-GPU MI300X node, for any plugin that reads amdsmi.

:func:`fake_amdsmi` builds a module that answers the amdsmi calls accelkit makes (the
conformance kit re-exports it for plugin authors): every call before ``amdsmi_init`` fails;
``amdsmi_shut_down`` is counted and, as in libamd_smi, succeeds without a session too. The AMD
plugin's own fake hosts, which add amd-smi and the driver's sysfs tree, are in
``accelkit_plugins.amd.testing``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any

from accelkit.testing.fakes._library import LibrarySession

__all__ = [
    "AMDSMI_STATUS_NOT_INIT",
    "AMDSMI_STATUS_NOT_SUPPORTED",
    "BUS_IDS",
    "MIB",
    "AmdSmiException",
    "AmdSmiLibraryException",
    "FakeAmdGpu",
    "card_vram_mib",
    "fake_amdgpus",
    "fake_amdsmi",
    "partitions_of",
]

MIB = 1 << 20

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
    """One GPU as amdsmi, amd-smi and sysfs show it: a whole card, or one compute partition of
    a card (``partition`` its index on the card, ``bus_id`` the card's, ``vram_mib`` and
    ``simd_count`` its share: see :func:`partitions_of`)."""

    bus_id: str
    serial: int
    market_name: str = "AMD Instinct MI300X"
    device_id: int = 0x74A1
    vram_mib: int = 196592
    simd_count: int = 1216
    numa_node: int = 0
    partition: int = 0

    @property
    def rocr_uuid(self) -> str:
        """The id ROCr gives the GPU (``GPU-`` and the KFD ``unique_id`` in hex)."""
        return f"GPU-{self.serial:016x}"

    @property
    def bdf(self) -> str:
        """The bus id KFD, amdsmi and amd-smi give it: its card's, with the partition's index
        OR-ed into the function bits, so partition 2 of ``0000:05:00.0`` is ``0000:05:00.2``
        (kfd_topology.c, ``kfd_topology_add_device``: ``location_id |= node_id`` when a card
        has several nodes). No such PCI function exists: sysfs has only the card's."""
        slot, function = self.bus_id.rsplit(".", 1)
        return f"{slot}.{int(function) | self.partition}"


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


def partitions_of(card: FakeAmdGpu, count: int, *, shared_id: bool = False) -> list[FakeAmdGpu]:
    """``card`` split into ``count`` compute partitions (an MI300X: DPX 2, QPX 4, CPX 8), in
    KFD order: each its index as ``partition``, its share of the compute units and of the VRAM
    (what its KFD node's ``mem_banks`` give), and its own unique id, as from ROCm 7.0; with
    ``shared_id`` the card's, as before 7.0. Up to 8: the index takes the 3 function bits."""
    if not 1 <= count <= 8:
        raise ValueError(f"a card splits into 1 to 8 partitions, not {count}")
    return [
        replace(
            card,
            serial=card.serial if shared_id else card.serial + (n << 32),
            vram_mib=card.vram_mib // count,
            simd_count=card.simd_count // count,
            partition=n,
        )
        for n in range(count)
    ]


def card_vram_mib(gpus: Sequence[FakeAmdGpu], gpu: FakeAmdGpu) -> int:
    """The VRAM amdsmi and amd-smi give ``gpu``: its whole card's (the sum over the card's
    partitions in ``gpus``), for a partition too, as they read the card's
    ``mem_info_vram_total`` (ROCm/legacy-rocm-build#4750: "rocm-smi and amd-smi always show the
    full GPU memory for each partition")."""
    return sum(other.vram_mib for other in gpus if other.bus_id == gpu.bus_id)


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
        "amdsmi_init",
        "amdsmi_shut_down",
        lambda: AmdSmiLibraryException(AMDSMI_STATUS_NOT_INIT),
        closing_idle_succeeds=True,  # libamd_smi answers success without a session
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
        amdsmi_get_gpu_device_bdf=lambda h: gpu(h).bdf,
        amdsmi_get_gpu_device_uuid=lambda h: (
            f"{gpu(h).device_id:04x}ff-0000-1000-8000-000000000000"
        ),
        amdsmi_get_gpu_vram_info=lambda h: {
            "vram_type": 9,
            "vram_vendor": "SAMSUNG",
            "vram_size": card_vram_mib(gpus, gpu(h)),
            "vram_bit_width": 8192,
        },
    )
    return module
