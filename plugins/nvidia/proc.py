"""The driver's ``/proc/driver/nvidia/gpus/<bus id>/information`` files, and a GPU's minor.

``/dev/nvidia<minor>`` is a GPU's device file, and the driver's ``Device Minor`` is not the
NVML index (NVML numbers GPUs by bus id; on a recorded H100 node GPU 0 is minor 4). SLURM's
cgroup gives a job the files ``gres.conf`` names, so the file must come from the minor, never
from the index. NVML answers the minor itself; nvidia-smi's CSV query has no minor, so with it
the minor is read here, by bus id, as it is in a replayed snapshot (recording copies these
files).

A GPU the operator excluded with the driver's ``NVreg_ExcludedGpus`` parameter keeps its
directory here, its file saying ``GPU Excluded: Yes``. The driver does not initialise it, so NVML
does not count it (it answers for it only through ``nvmlGetExcludedDeviceCount``), nor do
nvidia-smi and CUDA: :func:`driver_gpus` leaves it out, so that the GPUs after it are numbered as
CUDA numbers them.
"""

from __future__ import annotations

from typing import Optional

from accelkit import Host, note
from accelkit.detect import is_index, normalise_bus_id, parse_colon_records

__all__ = ["PROC_GPUS", "device_minor", "driver_gpus", "information", "proc_minor"]

PROC_GPUS = "/proc/driver/nvidia/gpus"


def information(host: Host, bus: str) -> dict[str, str]:
    """The ``Key: value`` fields of one GPU's information file; empty when there is none."""
    text = host.read_text(f"{PROC_GPUS}/{bus}/information")
    return dict((parse_colon_records(text, "Model", f"{bus}/information") or [{}])[0])


def driver_gpus(host: Host) -> Optional[list[tuple[str, dict[str, str]]]]:
    """``(bus id, fields)`` of each GPU the driver lists, in bus id order (NVML's), without those
    it excludes (a warning each); None when it lists none (no driver)."""
    buses = sorted(host.listdir(PROC_GPUS), key=str.lower)
    kept = []
    for bus, fields in ((bus, information(host, bus)) for bus in buses):
        if fields.get("GPU Excluded", "").strip().lower() != "yes":
            kept.append((bus, fields))
            continue
        note(
            f"the GPU at {bus} is left out: the driver excludes it (GPU Excluded: Yes in "
            f"{PROC_GPUS}/{bus}/information; NVreg_ExcludedGpus), so neither NVML nor CUDA "
            "counts it, and the GPUs after it take CUDA's numbers",
            "warning",
        )
    return kept if buses else None


def device_minor(fields: dict[str, str]) -> Optional[int]:
    """The ``Device Minor`` of an information file's fields, None when absent or unreadable."""
    minor = fields.get("Device Minor", "")
    return int(minor) if is_index(minor) else None


def proc_minor(host: Host, bus_id: object) -> Optional[int]:
    """The minor of the GPU at ``bus_id`` (any spelling: nvidia-smi's ``00000000:18:00.0``), or
    None when the driver's file for it is not there (then no device file is named)."""
    bus = normalise_bus_id(bus_id)
    return None if bus is None else device_minor(information(host, bus))
