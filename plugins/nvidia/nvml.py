"""NVML calls that some GPUs cannot answer: asked one field at a time, without failing the layer.

A GPU answers ``NVMLError_NotSupported`` to a query it has no answer for (memory on a GB10 or a
vGPU, MIG mode on a GPU without MIG, PCI facts, memory and compute mode on a Jetson's integrated
GPU), and a library older than the call answers ``NVMLError_FunctionNotFound``. Either costs that
field only: it is left empty with a note and the GPU is kept. Any other error still fails the
layer, so the next one answers. A GPU NVML counts but will not open for this process, one that
has fallen off the bus and one NVML cannot open cost that GPU only (``opened``, ``unless_lost``).
"""

from __future__ import annotations

from typing import Any, Callable, Optional, TypeVar, Union

from accelkit import note
from accelkit.detect import decode

__all__ = [
    "UNANSWERED",
    "cuda_handles",
    "field",
    "nvml_facts",
    "opened",
    "optional_call",
    "unanswered",
    "unless_lost",
]

ExceptionTypes = Union["type[BaseException]", "tuple[type[BaseException], ...]"]
"""What ``except`` takes: one exception class or a tuple of them."""

UNANSWERED = ("NVMLError_NotSupported", "NVMLError_FunctionNotFound")
"""The NVML errors that say "this device (or this library) has no answer to that call"."""


def optional_call(
    function: Callable[..., Any], *args: Any, errors: ExceptionTypes = Exception
) -> Any:
    """``function(*args)``, or None when it raises one of ``errors``: for library calls that
    answer "not supported" on some devices (NVML's MIG mode on a GPU without MIG)."""
    try:
        return function(*args)
    except errors:
        return None


def unanswered(nvml: Any) -> tuple[type[BaseException], ...]:
    """The loaded wrapper's classes for :data:`UNANSWERED` (a release may lack one)."""
    found = (getattr(nvml, name, None) for name in UNANSWERED)
    return tuple(error for error in found if isinstance(error, type))


def field(nvml: Any, call: str, handle: object, what: str, who: str) -> Any:
    """``nvml.<call>(handle)``, or None with a note when the device cannot answer it."""
    try:
        return getattr(nvml, call)(handle)
    except unanswered(nvml) as error:
        note(f"{who} does not report its {what} to NVML ({type(error).__name__}); left empty")
        return None


def opened(nvml: Any, index: int) -> list[Optional[object]]:
    """NVML's GPU ``index`` as ``[handle]``; ``[]`` for a GPU this process may not open, and
    ``[None]`` for one that has fallen off the bus, each with a warning.

    NVML counts every GPU, "even if nvmlDeviceGetHandleByIndex_v2 returns
    NVML_ERROR_NO_PERMISSION for such device" (nvml.h): a GPU whose device file this process
    may not open (a device cgroup denies it, or the file's mode). No process here can use it,
    and CUDA does not count it: it numbers only the GPUs whose files it may open (SLURM's GRES
    guide: a job given ``/dev/nvidia1`` under ``ConstrainDevices`` sees it as CUDA's GPU 0). So
    it is left out and the GPUs after it take CUDA's numbers, not NVML's. A Prohibited GPU
    differs: its file opens, CUDA counts it (``modes``).

    A GPU lost to the driver (``NVML_ERROR_GPU_IS_LOST``: "fallen off the bus or otherwise
    inaccessible", Xid 79, until a reboot) is still the driver's, and its device file still
    opens: CUDA counts it, and a process keeps off it by leaving its index out of
    ``CUDA_VISIBLE_DEVICES``. So it keeps its place in the numbering (``None``) and is left out:
    a grant must never hand it out. A GPU whose handle NVML answers with ``NVML_ERROR_UNKNOWN``
    is the same to a scheduler (nvidia-smi's "Unable to determine the device handle for GPU ...:
    Unknown Error", the usual face of a broken GPU, whose neighbours CUDA still runs on as
    before)."""
    try:
        handle: object = nvml.nvmlDeviceGetHandleByIndex(index)
    except nvml.NVMLError_NoPermission as error:
        note(
            f"NVML's GPU {index} is left out: NVML may not open it ({type(error).__name__}: "
            f"{error}); this process is denied its device file (a device cgroup, or the file's "
            "mode), so CUDA does not count it and the GPUs after it take CUDA's numbers",
            "warning",
        )
        return []
    except nvml.NVMLError_GpuIsLost as error:
        _lost(f"NVML's GPU {index}", error)
        return [None]
    except nvml.NVMLError_Unknown as error:
        note(
            f"NVML's GPU {index} is left out: NVML cannot open it ({type(error).__name__}: "
            f'{error}; nvidia-smi says "Unable to determine the device handle"); look for an '
            "Xid in the kernel log. The GPUs after it keep their numbers",
            "warning",
        )
        return [None]
    return [handle]


def cuda_handles(nvml: Any, count: int) -> list[Optional[object]]:
    """NVML's ``count`` GPUs as ``opened`` gives them, in CUDA's numbering; when not one of them
    opens (every one lost or unknown), NVML itself is of no use here and the layer fails, so
    that the next one answers."""
    handles = [handle for index in range(count) for handle in opened(nvml, index)]
    if handles and all(handle is None for handle in handles):
        raise RuntimeError(f"NVML could open none of the {len(handles)} GPUs it counts")
    return handles


Read = TypeVar("Read")


def unless_lost(nvml: Any, who: str, read: Callable[..., list[Read]], *args: Any) -> list[Read]:
    """``read(*args)``, or nothing with a warning when the GPU it reads (``who``) falls off the
    bus meanwhile (any NVML query may answer ``NVML_ERROR_GPU_IS_LOST``): that GPU only is left
    out."""
    try:
        return read(*args)
    except nvml.NVMLError_GpuIsLost as error:
        _lost(who, error)
        return []


def _lost(who: str, error: BaseException) -> None:
    """Warn that ``who``, a GPU lost to the driver, is left out, and what recovers it."""
    note(
        f"{who} is left out: it has fallen off the bus or is otherwise inaccessible "
        f"({type(error).__name__}: {error}); the driver recovers it only at a reboot (look for "
        "Xid 79 in the kernel log), and the GPUs after it keep their numbers",
        "warning",
    )


def nvml_facts(
    nvml: Any, handle: object, who: str, *, memory: bool = True
) -> tuple[Optional[str], Optional[str], Optional[int]]:
    """Name, UUID and memory in bytes of a GPU or MIG instance handle, each None where the
    device cannot answer (``who`` names it in the notes until its name and UUID are known).

    ``memory`` False leaves the memory unasked (None): for a MIG-enabled GPU, whose own memory
    NVML refuses to most callers and whose instances each report theirs."""
    name, uuid = (field(nvml, call, handle, what, who) for call, what in _TEXT)
    name, uuid = (None if v is None else decode(v) for v in (name, uuid))
    if not memory:
        return name, uuid, None
    if name and uuid:
        who = f"{name} ({uuid})"
    info = field(nvml, "nvmlDeviceGetMemoryInfo", handle, "memory", who)
    return name, uuid, None if info is None else info.total


_TEXT = (("nvmlDeviceGetName", "name"), ("nvmlDeviceGetUUID", "UUID"))
