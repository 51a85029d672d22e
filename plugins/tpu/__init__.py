"""Google Cloud TPU: chips as the schedulable unit, and the pod slice each host belongs to.

Ids are chip indices as libtpu's ``TPU_VISIBLE_CHIPS`` takes them. A process takes 1, 2 or 4
chips of a host as an aligned block, with bounds that tell libtpu the block's shape, or the whole
host, where every variable is left unset so libtpu uses its defaults (which also carry the pod
slice). GKE and the TPU VM image describe the slice in ``TPU_ACCELERATOR_TYPE`` ("v6e-16"),
``TPU_TOPOLOGY`` ("4x4"), ``TPU_WORKER_ID`` and ``TPU_NAME``; those are read here. The metadata
server is asked only when the user opts in (``ACCELKIT_TPU_METADATA=1``, see ``metadata``).
Every partial-host grant also writes ``ALLOW_MULTIPLE_LIBTPU_LOAD=1``: libtpu otherwise takes a
host-wide lock file, and the second process on the host aborts. A chip that exposes several PCI
functions (TPU7x, Ironwood: two) is one chip (``chips``), and the chips a host of a slice has
come from the generation table (``generations``), never from counting functions.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Optional

from accelkit import (
    ALIGNED_BLOCKS,
    AcceleratorManager,
    Device,
    Frameworks,
    Host,
    Scheduling,
    hookimpl,
    note,
)
from accelkit.detect import (
    PciDevice,
    detect_layers,
    device_files,
    join_ids,
    pci_devices,
    read_int,
)

from .chips import one_per_chip
from .generations import TpuSlice, chip_type_label, generation_named, tpu_slice
from .metadata import METADATA_VARS, pod_env
from .pod import env_labels, slice_resources

GOOGLE = 0x1AE0
# PCI base class of a chip newer than this table; Google's virtual NIC and disks share the vendor.
PROCESSING_ACCELERATOR = 0x12
# PCI device id -> generation as Cloud TPU accelerator types spell it (v5e is "v5litepod").
GENERATIONS = {0x005E: "v4", 0x0062: "v5p", 0x0063: "v5litepod", 0x006F: "v6e", 0x0076: "v7x"}
V2_V3, V2_V3_SUBSYSTEMS = 0x0027, {0x004E: "v2", 0x004F: "v3"}  # told apart by subsystem id
POD_TYPE = r"(?:v|tpu)(\d+[a-z]*)-(\d+)"  # "v6e-16"; Ironwood spells "tpu7x-16"
POD_LABELS = {"topology": "TPU_TOPOLOGY", "worker-id": "TPU_WORKER_ID", "slice-name": "TPU_NAME"}
POD_VARS = ("TPU_ACCELERATOR_TYPE", *POD_LABELS.values())

VISIBLE = "TPU_VISIBLE_CHIPS"
CHIP_BOUNDS = ("TPU_CHIPS_PER_HOST_BOUNDS", "TPU_CHIPS_PER_PROCESS_BOUNDS")  # older, newer name
HOST_BOUNDS = ("TPU_HOST_BOUNDS", "TPU_PROCESS_BOUNDS")  # older, newer name
SHARED_HOST = "ALLOW_MULTIPLE_LIBTPU_LOAD"  # "1": libtpu lets several processes share a host
# Chips a process takes -> chip bounds; with host bounds 1,1,1 the block is a slice of its own.
# (v7x, two dies a chip, describes blocks in four dimensions: its blocks are not modelled here.)
BLOCK_BOUNDS = {1: "1,1,1", 2: "1,2,1", 4: "2,2,1"}
MAX_CHIPS_PER_HOST = 8
Env = dict[str, Optional[str]]


class TpuManager(AcceleratorManager):
    """Google TPU chips: 1, 2, 4 or 8 per process as aligned blocks, with their bounds."""

    name = "tpu"
    resource_name = "TPU"
    api_version = 2
    visible_devices_env_var = VISIBLE
    env_vars_read = (VISIBLE, *CHIP_BOUNDS, *HOST_BOUNDS, SHARED_HOST, *POD_VARS, *METADATA_VARS)
    fractional = False
    scheduling = Scheduling(allowed_quantities=(1, 2, 4, 8), placement=ALIGNED_BLOCKS)
    frameworks = Frameworks(device="xla", collective="xla", platform="tpu")

    def visibility_env(self, ids: Sequence[str], *, total: Optional[int] = None) -> Env:
        """Bounds for a block of 1, 2 or 4 chips, with libtpu told it shares the host; every
        variable unset for the whole host.

        ``total`` is the number of chips on the node, when the caller knows it: every chip of a
        4-chip host is then the whole host too, as 8 chips always are.
        """
        count = len(ids)
        if count == MAX_CHIPS_PER_HOST or (count and count == total):
            return dict.fromkeys((VISIBLE, *CHIP_BOUNDS, *HOST_BOUNDS, SHARED_HOST))
        if count and count not in BLOCK_BOUNDS:
            raise ValueError(
                f"{count} TPU chips {list(ids)}: a process takes 1, 2 or 4 chips, or the whole host"
            )
        if not count:  # hiding every chip: no block, no bounds, no process to share with
            return {VISIBLE: "", **dict.fromkeys((*CHIP_BOUNDS, *HOST_BOUNDS, SHARED_HOST))}
        chips = BLOCK_BOUNDS[count]
        bounds = {**dict.fromkeys(CHIP_BOUNDS, chips), **dict.fromkeys(HOST_BOUNDS, "1,1,1")}
        return {VISIBLE: join_ids(ids), **bounds, SHARED_HOST: "1"}

    def detect(self, host: Host) -> list[Device]:
        """Chips behind Google's device files, else Google's TPU PCI devices."""
        return detect_layers(host, ("devfs", self._from_device_files), ("sysfs", self._from_pci))

    def _from_device_files(self, host: Host) -> Optional[list[Device]]:
        """``/dev/accel*`` and ``/dev/vfio/*`` files whose PCI device is a Google TPU."""
        chips = [file.pci for file in device_files(host, GOOGLE) if _is_tpu(file.pci)]
        return self._chips(host, chips) if chips else None

    def _from_pci(self, host: Host) -> Optional[list[Device]]:
        """TPU chips on the PCI bus, when no device file opens them."""
        chips = [pci for pci in pci_devices(host, GOOGLE) if _is_tpu(pci)]
        if chips:
            note("TPU chips are on the PCI bus, but no /dev/accel* or /dev/vfio/* file opens them")
        return self._chips(host, chips) if chips else None

    def _chips(self, host: Host, functions: Sequence[PciDevice]) -> list[Device]:
        """The host's chips in bus order, a chip's PCI functions counted once (``chips``),
        labelled by the pod type's generation when known, else by the PCI device id's."""
        pod = _pod_type(pod_env(host))
        generation = pod[0] if pod else _generation(host, functions[0])
        chips = one_per_chip(functions, generation_named(generation or ""))
        return [_chip(host, n, pci, pod[0] if pod else None) for n, pci in enumerate(chips)]

    def additional_resources(self, devices: Sequence[Device], host: Host) -> dict[str, float]:
        """``{<TPU_NAME>: 1}`` on every host of a slice, ``TPU-<pod type>-head`` on worker 0."""
        env = pod_env(host)
        pod = _pod_type(env)
        if not devices or pod is None:
            return {}
        head = f"TPU-{pod[0]}-{pod[1]}-head"
        return slice_resources(env.get("TPU_NAME"), env.get("TPU_WORKER_ID"), head)

    def labels(self, devices: Sequence[Device], host: Host) -> dict[str, str]:
        """Chips per host and the slice: pod type, chips per pod, topology, worker id, name."""
        if not devices:
            return {}
        env = pod_env(host)
        labels = {"chips-per-host": str(_chips_per_host(env, len(devices)))}
        labels.update(env_labels(env, POD_LABELS))
        pod = _pod_type(env)
        if pod:
            known = generation_named(pod[0])
            cores_per_chip = known.cores_per_chip if known else 2  # unknown: as most have
            per_pod = pod[1] // cores_per_chip  # the pod type's suffix counts TensorCores
            labels.update({"pod-type": f"{pod[0]}-{pod[1]}", "chips-per-pod": str(per_pod)})
        return labels

    def slice_shape(self, accelerator_type: str, topology: str) -> TpuSlice:
        """The pod slice ``accelerator_type`` ("v6e", "v6e-16") shaped ``topology`` ("4x4"): its
        chips, chips per host, hosts, pod type, head resource and type label, for training plans.

        Not a member of AcceleratorManager: ``accelkit.scaling`` asks a family for this method by
        name, so any family whose hosts form multi-host slices may offer it with this signature
        and a record with those fields, raising ``ValueError`` for a shape it does not have.
        """
        return tpu_slice(accelerator_type, topology)


def _chip(host: Host, index: int, pci: PciDevice, generation: Optional[str]) -> Device:
    """Chip ``index`` of the host; the pod type's generation wins over the PCI id's."""
    generation = generation or _generation(host, pci)
    if generation is None:
        note(f"TPU {pci.bus_id} has PCI device id {pci.device:#06x}: unknown generation")
    label = chip_type_label(generation) if generation else "TPU"
    model = f"TPU {generation}" if generation else f"TPU (PCI device {pci.device:#06x})"
    return Device(
        str(index), type_label=label, model=model, pci_bus_id=pci.bus_id, numa_node=pci.numa_node
    )


def _is_tpu(pci: PciDevice) -> bool:
    """A known TPU device id, or a processing accelerator (class 0x12) of Google's."""
    known = pci.device in GENERATIONS or pci.device == V2_V3
    return known or (pci.class_code is not None and pci.class_code >> 16 == PROCESSING_ACCELERATOR)


def _generation(host: Host, pci: PciDevice) -> Optional[str]:
    """The generation the PCI ids say (v2 and v3 share a device id; the subsystem tells)."""
    if pci.device == V2_V3:
        return V2_V3_SUBSYSTEMS.get(read_int(host, f"{pci.path}/subsystem_device", 16) or 0)
    return GENERATIONS.get(pci.device)


def _chips_per_host(env: Mapping[str, str], counted: int) -> int:
    """Chips per host from the generation's table for the slice ``TPU_ACCELERATOR_TYPE`` and
    ``TPU_TOPOLOGY`` describe (never from counting PCI functions); the chips counted here
    when the variables do not describe a slice the table has."""
    pod, topology = env.get("TPU_ACCELERATOR_TYPE"), env.get("TPU_TOPOLOGY")
    if not (pod and topology):
        return counted
    try:
        return tpu_slice(pod, topology).chips_per_host
    except ValueError:
        return counted


def _pod_type(env: Mapping[str, str]) -> Optional[tuple[str, int]]:
    """(generation, suffix) of ``TPU_ACCELERATOR_TYPE``, e.g. ("v6e", 16); "tpu7x" reads "v7x"."""
    raw = env.get("TPU_ACCELERATOR_TYPE", "").strip().lower()
    match = re.fullmatch(POD_TYPE, raw)
    if raw and not match:
        note(f"TPU_ACCELERATOR_TYPE={raw!r} is not a pod type like v6e-16; ignored", "warning")
    return (f"v{match[1]}", int(match[2])) if match else None


@hookimpl
def accelkit_register_managers() -> list[AcceleratorManager]:
    """The plugin's one manager, for every scheduler that loads accelkit."""
    return [TpuManager()]
