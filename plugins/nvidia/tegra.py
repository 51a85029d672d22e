"""Jetson (Tegra) GPUs found from their files, where neither NVML nor nvidia-smi answers.

A Jetson's GPU is integrated in its Tegra SoC: not on PCI, absent from
``/proc/driver/nvidia/gpus``, and older JetPacks have no NVML at all. NVIDIA's own tools decide
"this is a Tegra system" from two files (go-nvlib ``pkg/nvlib/info/property-extractor.go``,
``HasTegraFiles``, which NVIDIA's Kubernetes device plugin uses): ``/etc/nv_tegra_release``
exists, or ``/sys/devices/soc0/family`` starts with "tegra" (any case). The GPU itself is opened
through the nvgpu driver's device files: ``/dev/nvhost-ctrl-gpu`` on JetPack 4 and 5, and the
``/dev/nvgpu/igpu0/`` directory on JetPack 6 (Orin); containers are given these files (and
``/dev/nvmap``) to use the GPU. So a Tegra system with one of those files has one GPU, CUDA
ordinal 0. ``/proc/device-tree/model`` ends in a NUL byte (not text to a Host), so the board's
name is read from ``/sys/devices/soc0/machine``, which the kernel fills from the same device-tree
model. Not confirmed here: the files of Jetson Thor (JetPack 7, whose OpenRM driver answers NVML
and opens ``/dev/nvidia0``); without NVML such a board is reported, not guessed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from accelkit import Device, Host, note
from accelkit.detect import read_value, type_label

__all__ = ["GPU_FILES", "MARKERS", "from_tegra_files", "is_tegra"]

MARKERS = ("/etc/nv_tegra_release", "/sys/devices/soc0/family")
GPU_FILES = ("/dev/nvhost-ctrl-gpu", "/dev/nvgpu/igpu0")
MACHINE = "/sys/devices/soc0/machine"


def is_tegra(host: Host) -> bool:
    """go-nvlib's test: the L4T release file, or a SoC family starting with "tegra"."""
    if host.exists(MARKERS[0]):
        return True
    family = host.read_text(MARKERS[1]) or ""
    return family.strip().lower().startswith("tegra")


def from_tegra_files(host: Host, rules: Sequence[tuple[str, str]]) -> Optional[list[Device]]:
    """The integrated GPU of a Tegra system, CUDA ordinal 0, labelled by ``rules`` from the
    board's name; None on any other machine (no answer: nothing is guessed)."""
    if not is_tegra(host):
        return None
    files = [path for path in GPU_FILES if host.exists(path)]
    if not files:
        note(
            f"a Tegra system ({MARKERS[0]} or a Tegra {MARKERS[1]}) without the GPU's files "
            f"({', '.join(GPU_FILES)}): no GPU this process can open (a container needs them)",
            "warning",
        )
        return None
    machine = read_value(host, MACHINE)
    note(
        f"Tegra GPU found from {', '.join(files)} (neither NVML nor nvidia-smi answered): its "
        "UUID, memory and compute mode are unknown"
    )
    label = type_label(machine, rules, ("NVIDIA",)) or "Jetson"
    return [Device("0", 0, type_label=label, model=machine)]
