"""NVIDIA GPUs: ``CUDA_VISIBLE_DEVICES`` ids, and MIG instances as devices of their own.

A grant writes ``CUDA_VISIBLE_DEVICES`` and ``CUDA_DEVICE_ORDER=PCI_BUS_ID``, so an index means
what NVML and nvidia-smi say (CUDA's default order, fastest first, differs), but for the GPUs
after one this process may not open, which CUDA does not count (``opened``). On read CUDA takes
indices and ``GPU-``/``MIG-`` UUIDs or unique prefixes of them, and stops at the first token it
cannot read (so ``-1`` hides every GPU; ``cuda_visible`` holds the rules measured on an H100 and
an H200).
``NVIDIA_VISIBLE_DEVICES`` is the container runtime's layer, in host ids: it is recorded, never
read as CUDA ids.

A MIG-enabled GPU is never handed out by its index: each MIG instance is a device (id
``MIG-<uuid>``, label like ``A100-1g.5gb``, ``parent`` = the GPU's index), granted whole and
one per grant (the core's default ``partitions_per_grant``: a CUDA process uses one instance).
Where the instances cannot be listed, the GPU is left out with a diagnostic.

A GPU's compute mode (``modes``) decides how it is offered: not at all in ``Prohibited`` (it
is returned with ``offered=False``: CUDA counts it, so ``CUDA_VISIBLE_DEVICES`` reads on past
it), and whole, to one grant at a time, in ``Exclusive_Process`` (``Device.exclusive``). A fact
one GPU cannot give NVML (memory on a GB10, PCI facts on a Jetson) is left empty with a note;
the GPU stays (``nvml``). A GPU NVML counts but will not open for this process (a device cgroup
denies its file) is left out with a warning, and the others are numbered as CUDA numbers them,
without it (``opened``); one that has fallen off the bus, or that NVML cannot open, is left out
with a warning too, and keeps its place in the numbering, as it does in CUDA's.

Detection: NVML (``pynvml``, no CUDA context), else ``nvidia-smi``'s CSV query, else
``/proc/driver/nvidia/gpus/<bus id>/information`` numbered by bus id, as NVML numbers them,
without a GPU the driver excludes (``NVreg_ExcludedGpus``: NVML and CUDA do not count it), else a
Jetson's integrated GPU from its Tegra files (``tegra``). Each GPU's device file is
``/dev/nvidia<minor>``, its ``Device.minor`` from NVML or the driver's file (``proc``), never
its index; a GPU whose minor is not read gets no file in exports.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from accelkit import AcceleratorManager, Device, Frameworks, Host, Scheduling, hookimpl, note
from accelkit.detect import (
    decode,
    detect_layers,
    device_count,
    is_index,
    library_session,
    parse_memory,
    type_label,
)

from .cuda_visible import cuda_ids, names_uuid
from .modes import offered, smi_modes
from .nvml import cuda_handles, field, nvml_facts, optional_call, unanswered, unless_lost
from .proc import device_minor, driver_gpus, proc_minor
from .smi import smi_rows
from .tegra import from_tegra_files

# Marketing names -> labels ("NVIDIA H100 80GB HBM3" -> "H100"); others: the sanitized name.
MODELS = r"GB300|GB200|GH200|B300|B200|B100|H200|H100|H800|H20|A100|A800|A40|A30|A16|A10G|A10|A2"
MODELS += r"|L40S|L40|L20|L4|T4|V100S|V100|P100|P40|P4|K80"
JETSON = (r"\b(Orin|Thor|Xavier)\b", r"Jetson-\1")  # NVML's "Orin (nvgpu)", a board's name
TYPE_LABELS = ((r"\bRTX PRO (\d+)\b", r"RTX-PRO-\1"), (rf"\b({MODELS})\b", r"\1"), JETSON)
# "... MIG 1g.5gb" -> "A100-1g.5gb"; compute-instance profiles ("1c.3g.40gb") and media or
# graphics options ("1g.10gb+me", "1g.24gb-me", "+gfx") are other profiles, kept whole.
MIG_PROFILE = r"(?i)(?<![\w.])(?:\d+c\.)?\d+g\.\d+gb(?:[+-][a-z]+(?:\.[a-z]+)?)*"
NVML_ABSENT = ("NVMLError_LibraryNotFound", "NVMLError_DriverNotLoaded")  # no stack: info
# The documented query plus the MIG mode, so that a MIG-enabled GPU is never offered whole.
QUERY = "index,uuid,name,memory.total,pci.bus_id,mig.mode.current"
NVIDIA_SMI = ("nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits")
MIG_CAPS = "/proc/driver/nvidia/capabilities"


class NvidiaManager(AcceleratorManager):
    """NVIDIA GPUs, and MIG instances in place of a MIG-enabled GPU, as CUDA numbers them."""

    name = "nvidia"
    resource_name = "GPU"
    api_version = 2
    visible_devices_env_var = "CUDA_VISIBLE_DEVICES"
    env_vars_read = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES")
    scheduling = Scheduling(device_file="/dev/nvidia{minor}")  # the minor is not the index
    frameworks = Frameworks(
        device="cuda",
        collective="nccl",
        memory_hints=True,  # JAX and TensorFlow on CUDA/ROCm read them
        shared_visibility=True,
    )

    def read_visible(self, env: Mapping[str, str]) -> Optional[list[str]]:
        """CUDA's reading (``cuda_visible``): ids up to the first token CUDA cannot use, an
        ordinal twice is CUDA's start-up error; ``NVIDIA_VISIBLE_DEVICES`` holds host ids for
        the container runtime, never CUDA's."""
        return cuda_ids(env.get("CUDA_VISIBLE_DEVICES"))

    def matches(self, token: str, device: Device) -> bool:
        """An ordinal names a whole GPU (never a MIG instance); a UUID may be a prefix, in any
        case (the core takes a prefix that names two devices as naming none, as CUDA does). A
        MIG instance is named by ``MIG-`` only: ``GPU-`` with its digits was not measured."""
        if is_index(token):
            return device.parent is None and device.index == int(token)
        return token == device.id or names_uuid(token, device.uuid)

    def visibility_env(
        self, ids: Sequence[str], *, total: Optional[int] = None
    ) -> dict[str, Optional[str]]:
        """The ids, with CUDA told to number GPUs by PCI bus id as NVML and nvidia-smi do."""
        return {**super().visibility_env(ids, total=total), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}

    def detect(self, host: Host) -> list[Device]:
        """NVML, else nvidia-smi's CSV, else the driver's files under /proc, else a Jetson's
        GPU from its Tegra files (``tegra``)."""
        layers = (("library", from_nvml), ("command", from_nvidia_smi), ("sysfs", from_proc))
        return detect_layers(host, *layers, ("devfs", from_tegra))


def gpu(
    index: int,
    name: Optional[str],
    uuid: Optional[str],
    memory: Optional[int],
    bus: object,
    minor: Optional[int] = None,
) -> Device:
    """A whole GPU as any layer describes it (detection adds its NUMA node from sysfs)."""
    bus_id = None if bus is None else decode(bus)
    facts: dict[str, Any] = {"model": name, "uuid": uuid, "pci_bus_id": bus_id, "minor": minor}
    label = type_label(name, TYPE_LABELS, ("NVIDIA", "Tesla"))
    return Device(str(index), index, type_label=label, memory_bytes=memory, **facts)


def left_out(index: object, why: str) -> list[Device]:
    """No device for a GPU that cannot be handed out by its index, with the reason noted."""
    note(f"GPU {index} is left out: {why}; MIG instances are listed only through NVML", "warning")
    return []


def from_nvml(host: Host) -> Optional[list[Device]]:
    """Every GPU NVML counts and this process may open, its MIG instances in place of a
    MIG-enabled one, numbered as CUDA numbers them: in NVML's order (by PCI bus id, CUDA's with
    ``CUDA_DEVICE_ORDER=PCI_BUS_ID``), without the GPUs this process may not open; a GPU that
    has fallen off the bus or that NVML cannot open (a None handle) keeps its number and is
    left out (``opened``), unless no GPU opens at all: NVML is of no use then, and the next
    layer answers."""
    with library_session(host, "pynvml", "nvmlInit", "nvmlShutdown", NVML_ABSENT) as nvml:
        if nvml is None:
            return None
        count = device_count(nvml.nvmlDeviceGetCount(), "NVML's device count")
        handles = cuda_handles(nvml, count)
        return [
            device
            for index, handle in enumerate(handles)
            if handle is not None
            for device in unless_lost(nvml, f"GPU {index}", nvml_gpu, nvml, handle, index)
        ]


def nvml_gpu(nvml: Any, handle: object, index: int) -> list[Device]:
    """The GPU of ``handle``, CUDA's GPU ``index``, as one device, or its MIG instances when MIG
    is enabled on it, as its compute mode lets them be offered (``modes``); a fact it cannot
    answer is left empty.

    A MIG-enabled GPU is not asked for its own memory: NVML answers it only to a caller holding
    the MIG monitor capability and refuses everyone else (``NVMLError_NoPermission``, nvml.h's
    nvmlDeviceGetMemoryInfo; the rule in most containers), and each instance reports its own."""
    who = f"GPU {index}"
    pci = field(nvml, "nvmlDeviceGetPciInfo", handle, "PCI bus id", who)
    minor = field(nvml, "nvmlDeviceGetMinorNumber", handle, "device minor", who)
    in_mig_mode = mig_enabled(nvml, handle)
    facts = nvml_facts(nvml, handle, who, memory=not in_mig_mode)
    whole = gpu(index, *facts, None if pci is None else pci.busId, minor)
    mode = field(nvml, "nvmlDeviceGetComputeMode", handle, "compute mode", who)
    devices = nvml_partitions(nvml, handle, whole) if in_mig_mode else [whole]
    return offered(devices, mode, index)


def mig_enabled(nvml: Any, handle: object) -> bool:
    """Whether MIG is enabled on a GPU; a GPU without MIG answers "not supported" (a library
    older than MIG, "function not found"). Any other error fails the layer, so that a GPU whose
    MIG mode is unknown is never offered whole by its index: nvidia-smi's layer answers."""
    mig_mode = optional_call(nvml.nvmlDeviceGetMigMode, handle, errors=unanswered(nvml))
    return bool(mig_mode) and mig_mode[0] == nvml.NVML_DEVICE_MIG_ENABLE


def nvml_partitions(nvml: Any, handle: object, whole: Device) -> list[Device]:
    """The MIG instances of a MIG-enabled GPU, each a device of its own (``whole`` gives them
    their parent's facts)."""
    # An NVML error from here on fails the layer: the next ones leave this GPU out, with a note.
    slots = range(nvml.nvmlDeviceGetMaxMigDeviceCount(handle))
    instances = [d for slot in slots for d in mig_instance(nvml, handle, slot, whole)]
    if not instances:
        return left_out(whole.id, "MIG is enabled and it has no MIG instances")
    return instances


def mig_instance(nvml: Any, handle: object, slot: int, parent: Device) -> list[Device]:
    """The MIG instance in ``slot`` of a GPU as a device of its own; none for an empty slot."""
    try:
        mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
    except nvml.NVMLError_NotFound:
        return []
    name, uuid, memory = nvml_facts(nvml, mig, f"MIG instance {slot} of GPU {parent.id}")
    if uuid is None:
        note(
            f"MIG instance {slot} of GPU {parent.id} has no UUID, its only CUDA id: left out",
            "warning",
        )
        return []
    found = re.search(MIG_PROFILE, name or "")
    label = f"{parent.type_label}-{found[0]}" if found else parent.type_label
    changes = {"id": uuid, "uuid": uuid, "model": name, "memory_bytes": memory, "type_label": label}
    # An instance's device files are its parent's and /dev/nvidia-caps ones: no minor of its own.
    return [parent.replace(index=None, parent=parent.id, minor=None, **changes)]


def from_nvidia_smi(host: Host) -> Optional[list[Device]]:
    """One GPU per row; an unreadable index makes the layer fail, so the next one answers. A GPU
    nvidia-smi names but cannot reach (exit status 15) is left out, and the others keep their
    numbers (``smi``)."""
    rows = smi_rows(host, NVIDIA_SMI, 6, 4)  # without the GPUs it cannot reach (``smi``)
    if not rows:  # no GPU prints "No devices were found" and exits 6: nothing is no answer
        return None
    for index, *_ in (row for row in rows if row[5] == "Enabled"):
        left_out(index, "MIG is enabled")
    modes = smi_modes(host)
    devices = []
    for index, uuid, name, memory, bus, mig_mode in rows:
        if mig_mode != "Enabled":
            minor = proc_minor(host, bus)  # nvidia-smi's query has none: the driver's file
            whole = gpu(int(index), name, uuid, parse_memory(memory, "MiB"), bus, minor)
            devices += offered([whole], modes.get(index), index)
    return devices


def from_proc(host: Host) -> Optional[list[Device]]:
    """The driver's own files; numbered by bus id (NVML's order), never by Device Minor, and
    without the GPUs the driver excludes, as CUDA numbers them (``proc``)."""
    gpus = driver_gpus(host)  # None: the driver lists none
    devices = []
    for index, (bus, fields) in enumerate(gpus or ()):
        minor = device_minor(fields)  # its device file and MIG capabilities, unless unreadable
        if minor is None or host.glob(f"{MIG_CAPS}/gpu{minor}/mig/gi*"):
            left_out(index, "no Device Minor" if minor is None else "it has MIG instances")
            continue
        name, uuid = fields.get("Model", ""), fields.get("GPU UUID", "")
        devices.append(gpu(index, name, uuid, None, fields.get("Bus Location", bus), minor))
    return None if gpus is None else devices


def from_tegra(host: Host) -> Optional[list[Device]]:
    """A Jetson's integrated GPU from its Tegra files, labelled as NVML would label it."""
    return from_tegra_files(host, TYPE_LABELS)


@hookimpl
def accelkit_register_managers() -> list[AcceleratorManager]:
    """The plugin's one manager, for every scheduler that loads accelkit."""
    return [NvidiaManager()]
