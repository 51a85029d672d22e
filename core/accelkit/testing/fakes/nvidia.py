"""A fake ``pynvml`` over GPUs modelled on an 8-GPU H100 SXM node, for any plugin that reads NVML.

:func:`fake_pynvml` builds a module that answers the NVML calls accelkit makes; the conformance
kit re-exports it for plugin authors who read NVML too (the NVIDIA plugin's own fake hosts, which
add nvidia-smi and the driver's files, are in ``accelkit_plugins.nvidia.testing``). It keeps the
rules of the real library that detection code most often gets wrong: every call before
``nvmlInit`` fails, and the library closes at the ``nvmlShutdown`` matching the first
``nvmlInit``; an index outside the GPUs is ``NVMLError_InvalidArgument``; a GPU without MIG
answers ``NVMLError_NotSupported`` to ``nvmlDeviceGetMigMode``; a GPU without MIG enabled has 0
MIG devices and answers ``NVMLError_NotSupported`` to ``nvmlDeviceGetMigDeviceHandleByIndex``;
empty MIG slots answer ``NVMLError_NotFound``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType, SimpleNamespace
from typing import Any, Callable, Optional

from accelkit.testing.fakes._library import LibrarySession

__all__ = [
    "BUS_IDS",
    "MIB",
    "MIG_PROFILE",
    "NVML_ERRORS",
    "FakeGpu",
    "FakeMig",
    "NVMLError",
    "fake_gpus",
    "fake_pynvml",
]

MIB = 1 << 20

BUS_IDS = (
    "0000:18:00.0",
    "0000:2a:00.0",
    "0000:3a:00.0",
    "0000:5d:00.0",
    "0000:9a:00.0",
    "0000:ab:00.0",
    "0000:ba:00.0",
    "0000:db:00.0",
)
"""PCI addresses of the eight GPUs of the modelled board, in bus (NVML) order."""


MIG_PROFILE = "1g.10gb"
"""The smallest MIG profile of an H100 80GB: what a :class:`FakeMig` is unless told otherwise."""


@dataclass(frozen=True)
class FakeMig:
    """One MIG instance as NVML shows it. ``name`` None: NVML's name for an instance of
    :data:`MIG_PROFILE`, its GPU's name and the profile ("NVIDIA H100 80GB HBM3 MIG 1g.10gb");
    ``memory_bytes`` is that profile's on an H100 80GB (9.75 GiB, ``nvidia-smi mig -lgip``)."""

    uuid: str
    name: Optional[str] = None
    memory_bytes: int = 9984 * MIB

    def name_on(self, gpu: FakeGpu) -> str:
        """The name NVML gives this instance on ``gpu``."""
        if self.name is not None:
            return self.name
        return f"{gpu.name} MIG {MIG_PROFILE}"


@dataclass(frozen=True)
class FakeGpu:
    """One GPU. ``migs`` None: MIG not supported; a sequence: MIG-capable, and with
    ``mig_mode`` 1 enabled with these instances (in slots 0, 1, ... of ``mig_slots``). The
    default is an H100 as the recorded one is: MIG-capable, MIG off (nvidia-smi's "Disabled").
    ``compute_mode`` is NVML's ``NVML_COMPUTEMODE_*`` value (0 Default, 2 Prohibited, 3
    Exclusive_Process). ``accessible`` False: NVML counts the GPU but refuses this process its
    handle (``NVMLError_NoPermission``), as for a GPU whose device file a cgroup denies. ``lost``
    True: the GPU has fallen off the bus (Xid 79); NVML counts it and answers its handle with
    ``NVMLError_GpuIsLost``. ``broken`` True: NVML answers its handle with ``NVMLError_Unknown``
    (nvidia-smi: "Unable to determine the device handle for GPU ...: Unknown Error")."""

    uuid: str
    bus_id: str
    name: str = "NVIDIA H100 80GB HBM3"
    memory_bytes: int = 81559 * MIB
    numa_node: int = 0
    minor: int = 0
    migs: Optional[Sequence[FakeMig]] = ()
    mig_mode: int = 0
    mig_slots: int = 7
    compute_mode: int = 0
    accessible: bool = True
    lost: bool = False
    broken: bool = False

    def __post_init__(self) -> None:
        """Refuse a GPU no driver shows: MIG instances with MIG off (``replace(gpu, migs=...)``
        on a default GPU, which has MIG off, must say ``mig_mode=1`` too)."""
        if self.migs and self.mig_mode != 1:
            raise ValueError(
                f"FakeGpu {self.uuid} has MIG instances with MIG off (mig_mode={self.mig_mode}): "
                "MIG instances exist only while MIG is enabled; pass mig_mode=1"
            )

    @property
    def mig_enabled(self) -> bool:
        """MIG is supported and enabled: the GPU is split into its ``migs``."""
        return self.migs is not None and self.mig_mode == 1


def fake_gpus(count: int, name: str = "NVIDIA H100 80GB HBM3") -> list[FakeGpu]:
    """``count`` GPUs (up to 8) of one model in bus order; the upper half on NUMA node 1."""
    if not 0 <= count <= len(BUS_IDS):
        raise ValueError(f"the modelled board has 0 to {len(BUS_IDS)} GPUs, not {count}")
    return [
        FakeGpu(
            uuid=f"GPU-00000000-0000-0000-0000-{index:012x}",
            bus_id=BUS_IDS[index],
            name=name,
            numa_node=index * 2 // len(BUS_IDS),
            minor=(index + 4) % len(BUS_IDS),  # Device Minor is not the NVML index
        )
        for index in range(count)
    ]


class NVMLError(Exception):
    """The base of the fake's NVML errors, named as in nvidia-ml-py: ``except NVMLError``
    catches each of them in the fake as in the real wrapper."""


NVML_ERRORS = {
    "Uninitialized": "Uninitialized",
    "InvalidArgument": "Invalid Argument",
    "NotSupported": "Not Supported",
    "NoPermission": "Insufficient Permissions",
    "GpuIsLost": "GPU is lost",
    "NotFound": "Not Found",
    "FunctionNotFound": "Function Not Found",
    "DriverNotLoaded": "Driver Not Loaded",
    "LibraryNotFound": "NVML Shared Library Not Found",
    "Unknown": "Unknown Error",
}
"""The NVML errors the fake offers, as ``NVMLError_<name>`` classes: each raised without
arguments reads as the real wrapper's does (``str(NVMLError_NotSupported())`` is "Not
Supported"), so a test can make a call fail as it fails on a real machine."""


def _nvml_error(name: str, text: str) -> type[NVMLError]:
    """The class ``NVMLError_<name>`` whose instances read ``text``, as nvidia-ml-py's do."""

    def init(self: NVMLError, *args: object) -> None:
        NVMLError.__init__(self, text)

    return type(f"NVMLError_{name}", (NVMLError,), {"__init__": init, "__module__": "pynvml"})


class _NvmlSession(LibrarySession):
    """NVML's sessions, which it counts: "A reference count of the number of initializations is
    maintained. Shutdown only occurs when the reference count reaches zero" (nvml.h,
    nvmlShutdown). So a library that another user of NVML in the process (a monitor) has
    initialised stays open after detection's own nvmlInit and nvmlShutdown."""

    def __init__(self, not_open: Callable[[], Exception]) -> None:
        super().__init__("nvmlInit", "nvmlShutdown", not_open)
        self.holders = 0

    def init(self, *flags: object) -> None:
        super().init(*flags)
        self.holders += 1

    def shutdown(self) -> None:
        super().shutdown()  # refuses a shutdown without a session, and counts the call
        self.holders -= 1
        self.open = self.holders > 0


def fake_pynvml(
    gpus: Sequence[FakeGpu], *, text_as_bytes: bool = False, mig_monitor: bool = False
) -> ModuleType:
    """A module standing in for ``pynvml`` (nvidia-ml-py) over ``gpus``, in NVML index order.

    ``text_as_bytes`` makes names, UUIDs and bus ids ``bytes``, as older releases return them.
    ``mig_monitor`` is whether the caller holds the MIG monitor capability: without it, the
    default, a MIG-enabled GPU's own memory query raises ``NVMLError_NoPermission``, as
    :func:`~accelkit.testing.fakes.nvml_c.emulated_pynvml` explains.

    The module counts ``calls["nvmlInit"]`` and ``calls["nvmlShutdown"]``; tests may replace any
    of its functions to make a call fail, raising the module's ``NVMLError_*`` classes (those of
    :data:`NVML_ERRORS`), which have the real wrapper's names and messages. Where the real
    wrapper is installed, :func:`accelkit.testing.fakes.nvml_c.emulated_pynvml` runs it instead.
    """
    module = ModuleType("pynvml")
    errors = {name: _nvml_error(name, text) for name, text in NVML_ERRORS.items()}
    session = _NvmlSession(errors["Uninitialized"])
    ready = session.require

    def text(value: str) -> Any:
        return value.encode() if text_as_bytes else value

    def count() -> int:
        ready()
        return len(gpus)

    def handle(index: int) -> tuple[FakeGpu, Optional[FakeMig]]:
        ready()
        if not 0 <= index < len(gpus):  # pynvml passes a c_uint: -1 is past the end too
            raise errors["InvalidArgument"]()
        if not gpus[index].accessible:
            raise errors["NoPermission"]()
        if gpus[index].lost:
            raise errors["GpuIsLost"]()
        if gpus[index].broken:
            raise errors["Unknown"]()
        return gpus[index], None

    def part(h: tuple[FakeGpu, Optional[FakeMig]]) -> Any:
        ready()
        return h[1] or h[0]

    def name(h: tuple[FakeGpu, Optional[FakeMig]]) -> Any:
        ready()
        return text(h[0].name if h[1] is None else h[1].name_on(h[0]))

    def mig_mode(h: tuple[FakeGpu, Optional[FakeMig]]) -> list[int]:
        ready()
        if h[0].migs is None:
            raise errors["NotSupported"]()
        return [h[0].mig_mode, h[0].mig_mode]

    def split_by_mig(h: tuple[FakeGpu, Optional[FakeMig]]) -> bool:
        """The handle names a whole GPU with MIG enabled: the one kind with MIG devices."""
        return h[1] is None and h[0].mig_enabled

    def memory_info(h: tuple[FakeGpu, Optional[FakeMig]]) -> SimpleNamespace:
        device = part(h)
        if split_by_mig(h) and not mig_monitor:
            raise errors["NoPermission"]()
        return SimpleNamespace(total=device.memory_bytes, free=device.memory_bytes, used=0)

    def compute_mode(h: tuple[FakeGpu, Optional[FakeMig]]) -> int:
        ready()
        return h[0].compute_mode

    def minor_number(h: tuple[FakeGpu, Optional[FakeMig]]) -> int:
        ready()
        return h[0].minor

    def max_migs(h: tuple[FakeGpu, Optional[FakeMig]]) -> int:
        ready()
        return h[0].mig_slots if split_by_mig(h) else 0  # nvml.h: 0 unless MIG is enabled

    def mig_handle(h: tuple[FakeGpu, Optional[FakeMig]], slot: int) -> Any:
        ready()
        if not split_by_mig(h):
            raise errors["NotSupported"]()
        if not 0 <= slot < h[0].mig_slots:
            raise errors["InvalidArgument"]()
        migs = h[0].migs or ()
        if slot >= len(migs):
            raise errors["NotFound"]()
        return h[0], migs[slot]

    module.__dict__.update(
        NVMLError=NVMLError,
        **{f"NVMLError_{name}": error for name, error in errors.items()},
        NVML_DEVICE_MIG_DISABLE=0,
        NVML_DEVICE_MIG_ENABLE=1,
        NVML_COMPUTEMODE_DEFAULT=0,
        NVML_COMPUTEMODE_EXCLUSIVE_THREAD=1,
        NVML_COMPUTEMODE_PROHIBITED=2,
        NVML_COMPUTEMODE_EXCLUSIVE_PROCESS=3,
        calls=session.calls,
        nvmlInit=session.init,
        nvmlShutdown=session.shutdown,
        nvmlDeviceGetCount=count,
        nvmlDeviceGetHandleByIndex=handle,
        nvmlDeviceGetName=name,
        nvmlDeviceGetUUID=lambda h: text(part(h).uuid),
        nvmlDeviceGetMemoryInfo=memory_info,
        nvmlDeviceGetPciInfo=lambda h: SimpleNamespace(busId=text("0000" + h[0].bus_id.upper())),
        nvmlDeviceGetMigMode=mig_mode,
        nvmlDeviceGetComputeMode=compute_mode,
        nvmlDeviceGetMinorNumber=minor_number,
        nvmlDeviceGetMaxMigDeviceCount=max_migs,
        nvmlDeviceGetMigDeviceHandleByIndex=mig_handle,
    )
    return module
