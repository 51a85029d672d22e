"""The real ``pynvml`` (nvidia-ml-py) over an emulated ``libnvidia-ml``: vendor truth in tests.

A hand-written stand-in for ``pynvml`` only knows what its author believed; the real wrapper
knows which C function each call reaches, which ctypes structure it passes, which releases
return ``bytes`` and which exception class each NVML return code becomes. So
:func:`emulated_pynvml` loads a fresh copy of the real wrapper (the installed one, or another
release's ``pynvml.py``) and replaces only its two doors to the C library, ``_LoadNvmlLibrary``
and ``_nvmlGetFunctionPointer``: behind them, each emulated C function receives exactly the
ctypes arguments the wrapper passes, fills them as ``libnvidia-ml.so`` would from
:class:`~accelkit.testing.fakes.nvidia.FakeGpu` descriptions, and returns an NVML return code.

Rules of the real library kept here (nvml.h):

- every device call before ``nvmlInit`` (and after the last ``nvmlShutdown``) answers
  ``NVML_ERROR_UNINITIALIZED``;
- a GPU this process may not open is counted, and its handle refused
  (``NVML_ERROR_NO_PERMISSION``);
- a GPU without MIG answers ``NVML_ERROR_NOT_SUPPORTED`` to its MIG mode query; unless MIG is
  enabled on a GPU its MIG device count is 0 and its MIG device handles are
  ``NVML_ERROR_NOT_SUPPORTED``; an empty MIG slot answers ``NVML_ERROR_NOT_FOUND``;
- a GPU in MIG mode reports its own memory only to a caller with the MIG monitor capability
  (else ``NVML_ERROR_NO_PERMISSION``), and neither it nor a MIG instance reports its utilization
  (``NVML_ERROR_NOT_SUPPORTED``);
- a function this emulation does not know is ``NVML_ERROR_FUNCTION_NOT_FOUND``, as a symbol
  missing from an older driver's library is.
"""

from __future__ import annotations

import collections
import ctypes
from collections.abc import Collection, Mapping, Sequence
from types import ModuleType
from typing import Any, Callable, NamedTuple, Optional

from accelkit.testing.fakes._wrappers import (
    CountedFunction,
    PathLike,
    failing,
    fill,
    load_fresh,
    target,
)
from accelkit.testing.fakes.nvidia import FakeGpu, FakeMig

__all__ = ["H100_PCI_DEVICE_ID", "emulated_pynvml"]

H100_PCI_DEVICE_ID = 0x233010DE
"""``pciDeviceId`` as NVML packs it (device id << 16 | vendor 0x10de) for an H100 SXM."""

CFunction = Callable[..., Any]  # returns an NVML code (nvmlErrorString: bytes)


class Part(NamedTuple):
    """What a device handle names: GPU number ``number``, and its MIG instance ``mig`` if any."""

    number: int
    gpu: FakeGpu
    mig: Optional[FakeMig]

    @property
    def name(self) -> str:
        """The name NVML gives the handle's device."""
        return self.gpu.name if self.mig is None else self.mig.name_on(self.gpu)

    @property
    def uuid(self) -> str:
        """The UUID of the handle's device (``MIG-...`` for an instance)."""
        return (self.mig or self.gpu).uuid

    @property
    def memory_bytes(self) -> int:
        """The memory of the handle's device."""
        return (self.mig or self.gpu).memory_bytes

    @property
    def split_by_mig(self) -> bool:
        """The handle names a whole GPU with MIG enabled: the only kind of handle that has MIG
        devices (the others, MIG instances included, are devices without MIG)."""
        return self.mig is None and self.gpu.mig_enabled


def emulated_pynvml(
    gpus: Sequence[FakeGpu],
    *,
    source: Optional[PathLike] = None,
    init_error: Optional[int] = None,
    unsupported: Collection[str] = (),
    errors: Optional[Mapping[str, int]] = None,
    mig_monitor: bool = False,
) -> ModuleType:
    """A fresh copy of the real ``pynvml`` whose C library is emulated over ``gpus``.

    ``gpus`` are in NVML index order. ``source`` is another release's ``pynvml.py`` (default:
    the installed one). ``init_error`` is an NVML return code for ``nvmlInitWithFlags``
    (``NVML_ERROR_DRIVER_NOT_LOADED``: a library with no driver behind it), except
    ``NVML_ERROR_LIBRARY_NOT_FOUND``, which makes loading the library fail as it does where
    ``libnvidia-ml.so.1`` is missing. ``unsupported`` holds UUIDs of GPUs or MIG instances whose
    memory queries answer ``NVML_ERROR_NOT_SUPPORTED``. ``errors`` maps C function names to the
    return code they answer on every call (``{"nvmlDeviceGetName": NVML_ERROR_UNKNOWN}``).

    ``mig_monitor`` is whether the caller holds the MIG monitor capability
    (``/proc/driver/nvidia/capabilities/mig/monitor``; a container gets it only with
    ``NVIDIA_MIG_MONITOR_DEVICES=all``). nvml.h's nvmlDeviceGetMemoryInfo answers a MIG-enabled
    GPU's own (aggregate) memory "only if the caller has appropriate privileges", and refuses
    the others with ``NVML_ERROR_NO_PERMISSION``: what a process in a container gets
    (NVIDIA/k8s-device-plugin#399, NVIDIA/nvidia-container-toolkit#842). Refused is the default,
    because it is where accelkit's workers run and because code that copes with the refusal
    also works where the memory is answered. MIG instances always report their own memory.

    The module also carries ``calls``: how often each C function was called, by its C name
    (``calls["nvmlShutdown"]``), so tests can check sessions are closed.
    """
    module = load_fresh("pynvml", "nvidia-ml-py", source)
    library = EmulatedNvml(module, gpus, init_error, frozenset(unsupported), mig_monitor)
    library.functions.update({name: failing(code) for name, code in (errors or {}).items()})
    module.__dict__.update(
        _LoadNvmlLibrary=library.load,
        _nvmlGetFunctionPointer=library.function_pointer,
        calls=library.calls,
    )
    return module


class EmulatedNvml:
    """``libnvidia-ml.so`` for one copy of the wrapper: its C functions, by C name."""

    def __init__(
        self,
        module: ModuleType,
        gpus: Sequence[FakeGpu],
        init_error: Optional[int],
        unsupported: frozenset[str],
        mig_monitor: bool,
    ) -> None:
        self.wrapper = module
        self.gpus = list(gpus)
        self.init_error = init_error
        self.unsupported = unsupported
        self.mig_monitor = mig_monitor
        self.sessions = 0  # NVML counts nvmlInit calls and shuts down at the matching last one
        self.calls: collections.Counter[str] = collections.Counter()
        mig_query, query = self.on_device(mig=True), self.on_device()
        self.functions: dict[str, CFunction] = {
            "nvmlInitWithFlags": self.init,
            "nvmlShutdown": self.shutdown,
            "nvmlErrorString": self.error_string,
            "nvmlDeviceGetCount_v2": self.device_count,
            "nvmlDeviceGetHandleByIndex_v2": self.handle_by_index,
            "nvmlDeviceGetName": query(lambda part, *out: self.text(part.name, *out)),
            "nvmlDeviceGetUUID": query(lambda part, *out: self.text(part.uuid, *out)),
            "nvmlDeviceGetMemoryInfo": query(self.memory_info),
            "nvmlDeviceGetMemoryInfo_v2": query(self.memory_info),
            "nvmlDeviceGetPciInfo_v3": query(self.pci_info),
            "nvmlDeviceGetMigMode": mig_query(self.mig_mode),
            "nvmlDeviceGetComputeMode": query(self.compute_mode),
            "nvmlDeviceGetMinorNumber": query(self.minor_number),
            "nvmlDeviceGetUtilizationRates": query(self.utilization),
            "nvmlDeviceGetMaxMigDeviceCount": query(self.max_mig_count),
            "nvmlDeviceGetMigDeviceHandleByIndex": query(self.mig_handle),
        }

    def code(self, name: str) -> int:
        """An NVML return code by its name in the wrapper (``"NVML_ERROR_NOT_FOUND"``)."""
        value: int = getattr(self.wrapper, name)
        return value

    def load(self) -> None:
        """``_LoadNvmlLibrary``: the library is found, unless emulating a machine without it."""
        if self.init_error == self.code("NVML_ERROR_LIBRARY_NOT_FOUND"):
            raise self.wrapper.NVMLError(self.init_error)
        self.wrapper.__dict__["nvmlLib"] = self  # the wrapper's global: "the library is loaded"

    def function_pointer(self, name: str) -> CFunction:
        """``_nvmlGetFunctionPointer``: the emulated C function, counted on each call."""
        if getattr(self.wrapper, "nvmlLib", None) is None:
            raise self.wrapper.NVMLError(self.code("NVML_ERROR_UNINITIALIZED"))
        function = self.functions.get(name)
        if function is None:
            raise self.wrapper.NVMLError(self.code("NVML_ERROR_FUNCTION_NOT_FOUND"))
        return CountedFunction(name, function, self.calls)

    def init(self, flags: int) -> int:
        """nvmlInitWithFlags: a session, or the configured failure."""
        if self.init_error is not None:
            return self.init_error
        self.sessions += 1
        return self.code("NVML_SUCCESS")

    def shutdown(self) -> int:
        """nvmlShutdown: closes one session; with none open, NVML is uninitialised."""
        if not self.sessions:
            return self.code("NVML_ERROR_UNINITIALIZED")
        self.sessions -= 1
        return self.code("NVML_SUCCESS")

    def error_string(self, code: int) -> bytes:
        """nvmlErrorString: the wrapper sets ``restype = c_char_p``, which gives ``bytes``."""
        known: dict[int, str] = getattr(self.wrapper.NVMLError, "_errcode_to_string", {})
        return known.get(code, "Unknown Error").encode()

    def device_count(self, count: Any) -> int:
        """nvmlDeviceGetCount_v2(unsigned int *count)."""
        if not self.sessions:
            return self.code("NVML_ERROR_UNINITIALIZED")
        target(count).value = len(self.gpus)
        return self.code("NVML_SUCCESS")

    def handle_by_index(self, index: Any, device: Any) -> int:
        """nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device): NVML counts
        a GPU this process may not open, and one fallen off the bus, and refuses their handles
        (nvml.h)."""
        if not self.sessions:
            return self.code("NVML_ERROR_UNINITIALIZED")
        if not 0 <= index.value < len(self.gpus):
            return self.code("NVML_ERROR_INVALID_ARGUMENT")
        if not self.gpus[index.value].accessible:
            return self.code("NVML_ERROR_NO_PERMISSION")
        if self.gpus[index.value].lost:
            return self.code("NVML_ERROR_GPU_IS_LOST")
        if self.gpus[index.value].broken:
            return self.code("NVML_ERROR_UNKNOWN")
        set_handle(device, (index.value + 1) << 8)
        return self.code("NVML_SUCCESS")

    def on_device(self, mig: bool = False) -> Callable[[Callable[..., int]], CFunction]:
        """Wrap ``answer(part, *pointers)`` as a C function ``(nvmlDevice_t, *pointers)``.

        Outside a session it answers ``NVML_ERROR_UNINITIALIZED``; for a handle NVML never gave,
        ``NVML_ERROR_INVALID_ARGUMENT``. ``mig``: the MIG mode query, which needs a whole GPU (a
        MIG handle is an invalid argument) that supports MIG (else ``NVML_ERROR_NOT_SUPPORTED``).
        """

        def wrap(answer: Callable[..., int]) -> CFunction:
            def function(handle: Any, *pointers: Any) -> int:
                if not self.sessions:
                    return self.code("NVML_ERROR_UNINITIALIZED")
                part = self.part(handle)
                if part is None or (mig and part.mig is not None):
                    return self.code("NVML_ERROR_INVALID_ARGUMENT")
                if mig and part.gpu.migs is None:
                    return self.code("NVML_ERROR_NOT_SUPPORTED")
                return answer(part, *pointers)

            return function

        return wrap

    def part(self, handle: Any) -> Optional[Part]:
        """The GPU (and MIG instance) a device handle names; None for a handle NVML never gave.

        Handles are pointers NVML makes up: GPU ``i`` is ``(i + 1) << 8``, its MIG instance in
        slot ``s`` adds ``s + 1``.
        """
        value = ctypes.cast(handle, ctypes.c_void_p).value or 0
        index, slot = (value >> 8) - 1, (value & 0xFF) - 1
        if not 0 <= index < len(self.gpus):
            return None
        gpu = self.gpus[index]
        if slot < 0:
            return Part(index, gpu, None)
        migs = gpu.migs or ()
        return Part(index, gpu, migs[slot]) if slot < len(migs) else None

    def text(self, value: str, buffer: Any, length: Any) -> int:
        """A ``char *buffer`` of ``length`` bytes filled with ``value``, if it fits."""
        encoded = value.encode()
        if len(encoded) >= length.value:
            return self.code("NVML_ERROR_INSUFFICIENT_SIZE")
        buffer.value = encoded
        return self.code("NVML_SUCCESS")

    def memory_info(self, part: Part, memory: Any) -> int:
        """nvmlDeviceGetMemoryInfo(_v2)(nvmlDevice_t, nvmlMemory_t *): total, free, used; a
        MIG-enabled GPU's own memory only to a caller with the MIG monitor capability."""
        if part.uuid in self.unsupported:
            return self.code("NVML_ERROR_NOT_SUPPORTED")
        if part.split_by_mig and not self.mig_monitor:
            return self.code("NVML_ERROR_NO_PERMISSION")
        fill(target(memory), total=part.memory_bytes, free=part.memory_bytes, used=0)
        return self.code("NVML_SUCCESS")

    def pci_info(self, part: Part, info: Any) -> int:
        """nvmlDeviceGetPciInfo_v3(nvmlDevice_t, nvmlPciInfo_t *): ids as NVML spells them."""
        domain, bus, rest = part.gpu.bus_id.split(":")
        fill(
            target(info),
            busIdLegacy=f"{domain}:{bus}:{rest}".upper(),
            busId=f"0000{domain}:{bus}:{rest}".upper(),
            domain=int(domain, 16),
            bus=int(bus, 16),
            device=int(rest.split(".")[0], 16),
            pciDeviceId=H100_PCI_DEVICE_ID,
        )
        return self.code("NVML_SUCCESS")

    def mig_mode(self, part: Part, current: Any, pending: Any) -> int:
        """nvmlDeviceGetMigMode(nvmlDevice_t, unsigned int *current, unsigned int *pending)."""
        target(current).value = target(pending).value = part.gpu.mig_mode
        return self.code("NVML_SUCCESS")

    def compute_mode(self, part: Part, mode: Any) -> int:
        """nvmlDeviceGetComputeMode(nvmlDevice_t, nvmlComputeMode_t *mode): the GPU's mode."""
        target(mode).value = part.gpu.compute_mode
        return self.code("NVML_SUCCESS")

    def minor_number(self, part: Part, minor: Any) -> int:
        """nvmlDeviceGetMinorNumber(nvmlDevice_t, unsigned int *minor): the /dev/nvidia<minor>."""
        target(minor).value = part.gpu.minor
        return self.code("NVML_SUCCESS")

    def utilization(self, part: Part, rates: Any) -> int:
        """nvmlDeviceGetUtilizationRates(nvmlDevice_t, nvmlUtilization_t *): an idle GPU. NVML
        does not measure it per MIG instance nor on a GPU in MIG mode (NOT_SUPPORTED). Not asked
        by the plugins: monitors ask it (distributed's NVML diagnostics, in every Dask worker)."""
        in_mig_mode = part.gpu.migs is not None and part.gpu.mig_mode
        if part.mig is not None or in_mig_mode:
            return self.code("NVML_ERROR_NOT_SUPPORTED")
        fill(target(rates), gpu=0, memory=0)
        return self.code("NVML_SUCCESS")

    def max_mig_count(self, part: Part, count: Any) -> int:
        """nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t, unsigned int *count): the GPU's MIG
        slots; zero, with success, "if MIG is not supported or enabled" (nvml.h)."""
        target(count).value = part.gpu.mig_slots if part.split_by_mig else 0
        return self.code("NVML_SUCCESS")

    def mig_handle(self, part: Part, index: Any, mig: Any) -> int:
        """nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t, unsigned int, nvmlDevice_t *): as
        nvml.h lists its codes, NOT_SUPPORTED "if this query is not supported by the device"
        (MIG not supported or not enabled, or a MIG instance's own handle), INVALID_ARGUMENT for
        an index past the GPU's MIG slots, NOT_FOUND for an empty slot."""
        if not part.split_by_mig:
            return self.code("NVML_ERROR_NOT_SUPPORTED")
        if not 0 <= index.value < part.gpu.mig_slots:
            return self.code("NVML_ERROR_INVALID_ARGUMENT")
        if index.value >= len(part.gpu.migs or ()):
            return self.code("NVML_ERROR_NOT_FOUND")
        set_handle(mig, (part.number + 1) << 8 | (index.value + 1))
        return self.code("NVML_SUCCESS")


def set_handle(argument: Any, value: int) -> None:
    """Store a made-up device handle into the ``nvmlDevice_t`` that ``argument`` points at."""
    ctypes.c_void_p.from_buffer(target(argument)).value = value
