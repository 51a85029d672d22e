"""The real ``amdsmi`` package over an emulated ``libamd_smi.so``: vendor truth in tests.

The amdsmi package is the ctypes bindings (``amdsmi_wrapper``, which binds every C symbol at
import) under an interface (``amdsmi_interface``) that reshapes the C structures into dicts, and
the shapes move between releases: 6.0 gives ``vram_size_mb``, an int ``device_id`` and the raw
serial (hex digits, no ``0x``); 6.2 and later ``vram_size``, ``"0x74a1"`` and ``"0x..."``.
:func:`emulated_amdsmi` imports a fresh copy of the real package (the installed one, or another
release's package directory) with ``ctypes.CDLL`` stubbed, then replaces the C entry points the
interface reaches with functions that fill the ctypes structures it passes, as the C library
would, from :class:`~accelkit.testing.fakes.amd.FakeAmdGpu` descriptions. A C function not
emulated here raises ``NotImplementedError`` naming it, so a plugin reaching further is told.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import os
import pathlib
from collections.abc import Iterator, Mapping, Sequence
from types import ModuleType
from typing import Any, Callable, Optional

from accelkit.testing.fakes._wrappers import (
    CountedFunction,
    PathLike,
    failing,
    fill,
    load_fresh,
    target,
)
from accelkit.testing.fakes.amd import FakeAmdGpu, card_vram_mib

__all__ = ["emulated_amdsmi"]

GFX942 = 0x942  # target_graphics_version as the library packs "gfx942" (MI300X)


def emulated_amdsmi(
    gpus: Sequence[FakeAmdGpu],
    *,
    package_dir: Optional[PathLike] = None,
    handle_order: Optional[Sequence[int]] = None,
    init_error: Optional[int] = None,
    errors: Optional[Mapping[str, int]] = None,
) -> ModuleType:
    """A fresh copy of the real ``amdsmi`` package whose C library is emulated over ``gpus``.

    ``gpus`` are in KFD order (as the driver's topology nodes list them); the partitions of a
    card are processors of one socket, as in the library. ``package_dir`` is another release's
    ``amdsmi`` package directory (default: the installed one). ``handle_order`` lists positions
    in ``gpus`` in the order the library finds its GPUs, which on real machines differs from
    KFD's (default: KFD's); ``amdsmi_get_processor_handles()`` lists them socket by socket.
    ``init_error`` is an ``AMDSMI_STATUS_*`` code for ``amdsmi_init`` to return; ``errors`` maps
    C function names to the status they return on every call.

    The package also carries ``calls``: how often each C function was called, by its C name.
    """
    order = list(range(len(gpus))) if handle_order is None else list(handle_order)
    if sorted(order) != list(range(len(gpus))):
        raise ValueError(
            f"handle_order {order} is not an ordering of the {len(gpus)} GPU positions 0.."
            f"{len(gpus) - 1}"
        )
    with c_library_stubbed():
        package = load_fresh("amdsmi", "amdsmi", package_dir)
    library = EmulatedAmdSmi(package.amdsmi_wrapper, sockets(gpus, order), gpus, init_error)
    library.functions.update({name: failing(code) for name, code in (errors or {}).items()})
    for name, function in library.functions.items():
        setattr(package.amdsmi_wrapper, name, CountedFunction(name, function, library.calls))
    package.__dict__["calls"] = library.calls
    return package


@contextlib.contextmanager
def c_library_stubbed() -> Iterator[None]:
    """``ctypes.CDLL`` gives a library with every symbol while the wrapper imports, and
    ``ROCM_PATH`` is set (amdsmi 6.0 reads ``os.environ["ROCM_PATH"]`` at import)."""
    saved_cdll, saved_rocm = ctypes.CDLL, os.environ.get("ROCM_PATH")
    ctypes.CDLL = StubLibrary  # type: ignore[misc,assignment]
    os.environ.setdefault("ROCM_PATH", "/opt/rocm")
    try:
        yield
    finally:
        ctypes.CDLL = saved_cdll  # type: ignore[misc]
        if saved_rocm is None:
            os.environ.pop("ROCM_PATH", None)


class StubLibrary:
    """What the stubbed ``ctypes.CDLL`` loads: any symbol, as a function not emulated (yet)."""

    def __init__(self, path: object, *args: object, **kwargs: object) -> None:
        self.path = os.fspath(path) if isinstance(path, (str, pathlib.Path)) else str(path)

    def __getattr__(self, name: str) -> NotEmulated:
        if name.startswith("__"):
            raise AttributeError(name)
        return NotEmulated(name)


class NotEmulated:
    """A C symbol the wrapper binds at import and this emulation does not answer."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.restype: Any = ctypes.c_int
        self.argtypes: Any = None

    def __call__(self, *args: object) -> int:
        raise NotImplementedError(
            f"libamd_smi.so function {self.name}() is not emulated by "
            "accelkit.testing.fakes.amdsmi_c; emulate it there before relying on it"
        )


def sockets(gpus: Sequence[FakeAmdGpu], order: Sequence[int]) -> list[list[int]]:
    """Positions in ``gpus`` by socket, as libamd_smi makes its sockets: one per card, named by
    the domain, bus and device of its GPUs' bus ids (``AMDSmiSystem::get_gpu_socket_id``: "The
    BD part of the BDF is used as the socket id as it represents a physical device"), so the
    partitions of a card are processors of one socket; sockets in the order the library meets
    their first GPU in ``order``, each socket's processors in that order."""
    found: dict[str, list[int]] = {}
    for position in order:
        slot = gpus[position].bdf.rsplit(".", 1)[0]
        found.setdefault(slot, []).append(position)
    return list(found.values())


class EmulatedAmdSmi:
    """``libamd_smi.so`` for one copy of the package: its C functions, by C name.

    ``by_socket`` holds positions in ``kfd_order`` per socket (see :func:`sockets`). Handles are
    pointers the library makes up: socket ``k`` is ``0x5000 + k``, the processor of
    ``kfd_order[i]`` is ``0x1000 + i``.
    """

    def __init__(
        self,
        wrapper: ModuleType,
        by_socket: Sequence[Sequence[int]],
        kfd_order: Sequence[FakeAmdGpu],
        init_error: Optional[int],
    ) -> None:
        self.wrapper = wrapper
        self.by_socket, self.kfd_order = [list(s) for s in by_socket], list(kfd_order)
        self.init_error = init_error
        self.open = False
        self.calls: collections.Counter[str] = collections.Counter()
        self.functions: dict[str, Callable[..., int]] = {
            "amdsmi_init": self.init,
            "amdsmi_shut_down": self.shut_down,
            "amdsmi_get_socket_handles": self.socket_handles,
            "amdsmi_get_processor_handles": self.processor_handles,
            "amdsmi_get_gpu_asic_info": self.per_gpu(self.asic_info),
            "amdsmi_get_gpu_vram_info": self.per_gpu(self.vram_info),
            "amdsmi_get_gpu_device_bdf": self.per_gpu(self.device_bdf),
        }

    def code(self, name: str) -> int:
        """A status code by its name in the wrapper (``"AMDSMI_STATUS_NOT_INIT"``)."""
        value: int = getattr(self.wrapper, name)
        return value

    def init(self, flags: object) -> int:
        """amdsmi_init(uint64_t flags): a session, or the configured failure."""
        if self.init_error is not None:
            return self.init_error
        self.open = True
        return self.code("AMDSMI_STATUS_SUCCESS")

    def shut_down(self) -> int:
        """amdsmi_shut_down(): success, with a session or without one (``amd_smi.cc``: ``if
        (!initialized_lib) return AMDSMI_STATUS_SUCCESS;``)."""
        self.open = False
        return self.code("AMDSMI_STATUS_SUCCESS")

    def socket_handles(self, count: Any, handles: Any) -> int:
        """amdsmi_get_socket_handles(uint32_t *count, amdsmi_socket_handle *handles): the count
        when ``handles`` is NULL, else the handles (one socket per card)."""
        return self.listed(count, handles, [0x5000 + k for k in range(len(self.by_socket))])

    def processor_handles(self, socket: Any, count: Any, handles: Any) -> int:
        """amdsmi_get_processor_handles(socket, uint32_t *count, amdsmi_processor_handle *):
        the socket's processors, the partitions of its card."""
        k = (socket.value or 0) - 0x5000
        if not 0 <= k < len(self.by_socket):
            return self.code("AMDSMI_STATUS_INVAL")
        return self.listed(count, handles, [0x1000 + i for i in self.by_socket[k]])

    def listed(self, count: Any, handles: Any, values: Sequence[int]) -> int:
        """The C library's two-call listing: a count, then at most that many handles."""
        if not self.open:
            return self.code("AMDSMI_STATUS_NOT_INIT")
        if isinstance(handles, ctypes.Array):
            for n, value in enumerate(values[: len(handles)]):
                handles[n] = value
        target(count).value = len(values)
        return self.code("AMDSMI_STATUS_SUCCESS")

    def per_gpu(self, answer: Callable[[FakeAmdGpu, Any], None]) -> Callable[[Any, Any], int]:
        """A ``(amdsmi_processor_handle, struct *)`` query: the handle checked, then answered."""

        def query(handle: Any, out: Any) -> int:
            if not self.open:
                return self.code("AMDSMI_STATUS_NOT_INIT")
            index = (handle.value or 0) - 0x1000
            if not 0 <= index < len(self.kfd_order):
                return self.code("AMDSMI_STATUS_INVAL")
            answer(self.kfd_order[index], target(out))
            return self.code("AMDSMI_STATUS_SUCCESS")

        return query

    def asic_info(self, gpu: FakeAmdGpu, info: Any) -> None:
        """amdsmi_asic_info_t: the serial as the library reads it from sysfs (16 hex digits)."""
        fill(
            info,
            market_name=gpu.market_name,
            vendor_id=0x1002,
            vendor_name="Advanced Micro Devices Inc. [AMD/ATI]",
            subvendor_id=0x1002,
            device_id=gpu.device_id,
            rev_id=0,
            asic_serial=f"{gpu.serial:016x}",
            oam_id=self.kfd_order.index(gpu),
            num_of_compute_units=gpu.simd_count // 4,
            target_graphics_version=GFX942,
            subsystem_id=gpu.device_id,
        )

    def vram_info(self, gpu: FakeAmdGpu, info: Any) -> None:
        """amdsmi_vram_info_t: sizes in MiB, a partition's its whole card's (``card_vram_mib``);
        the vendor an enum until 7.0, then text."""
        vendor_field = dict(info._fields_)["vram_vendor"]
        vendor = "SAMSUNG" if issubclass(vendor_field, ctypes.Array) else 1
        fill(
            info,
            vram_type=9,  # HBM3
            vram_vendor=vendor,
            vram_size=card_vram_mib(self.kfd_order, gpu),
            vram_size_mb=card_vram_mib(self.kfd_order, gpu),
            vram_bit_width=8192,
        )

    def device_bdf(self, gpu: FakeAmdGpu, bdf: Any) -> None:
        """amdsmi_bdf_t: bit fields function:3, device:5, bus:8, domain:48 in one uint64; a
        partition's index in the function bits, as KFD's ``location_id`` has it."""
        domain, bus, rest = gpu.bdf.split(":")
        device, function = rest.split(".")
        packed = int(domain, 16) << 16 | int(bus, 16) << 8 | int(device, 16) << 3
        bdf.as_uint = packed | int(function)
