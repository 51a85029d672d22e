"""Fake NVIDIA hosts, modelled on an 8-GPU H100 SXM node.

:func:`make_host` tells the same GPUs three ways, through NVML (the kit's
:func:`~accelkit.testing.fake_pynvml`), ``nvidia-smi`` and the driver's ``/proc`` and sysfs
files, so each detection layer can be checked against the others.

``make_host`` is this family's backdoor for the conformance kit, declared in the entry-point
group ``accelkit.testing`` (in accelkit's ``pyproject.toml``) as a third-party plugin declares
its own.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Sequence

from accelkit import FakeHost
from accelkit.testing import FakeGpu, fake_gpus, fake_pynvml, write_pci_function

__all__ = [
    "COMPUTE_MODE_ARGV",
    "NVIDIA_SMI_ARGV",
    "compute_mode_output",
    "make_host",
    "nvidia_smi_output",
    "write_proc",
    "write_sysfs",
]

MIB = 1 << 20
NVIDIA_SMI_ARGV = (
    "nvidia-smi",
    "--query-gpu=index,uuid,name,memory.total,pci.bus_id,mig.mode.current",
    "--format=csv,noheader,nounits",
)
"""The query the NVIDIA plugin runs, spelled out here so a test catches the plugin changing it."""
COMPUTE_MODE_ARGV = ("nvidia-smi", "--query-gpu=index,compute_mode", "--format=csv,noheader")
"""The plugin's second query: each GPU's compute mode."""
COMPUTE_MODES = {0: "Default", 1: "Exclusive_Thread", 2: "Prohibited", 3: "Exclusive_Process"}


def nvidia_smi_output(gpus: Sequence[FakeGpu]) -> str:
    """What :data:`NVIDIA_SMI_ARGV` prints for ``gpus`` (MIG mode "[N/A]" without MIG)."""
    modes = {None: "[N/A]", 0: "Disabled", 1: "Enabled"}
    return "".join(
        f"{index}, {gpu.uuid}, {gpu.name}, {gpu.memory_bytes // MIB}, 0000{gpu.bus_id.upper()}, "
        f"{modes[None if gpu.migs is None else gpu.mig_mode]}\n"
        for index, gpu in enumerate(gpus)
    )


def compute_mode_output(gpus: Sequence[FakeGpu]) -> str:
    """What :data:`COMPUTE_MODE_ARGV` prints for ``gpus`` (``0, Default``)."""
    return "".join(f"{n}, {COMPUTE_MODES[gpu.compute_mode]}\n" for n, gpu in enumerate(gpus))


def write_proc(root: pathlib.Path, gpus: Sequence[FakeGpu]) -> None:
    """``/proc/driver/nvidia/gpus/<bus id>/information`` as the driver writes it, and the MIG
    capability directories of GPUs with MIG instances."""
    for gpu in gpus:
        directory = root / "proc/driver/nvidia/gpus" / gpu.bus_id
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "information").write_text(
            f"Model: \t\t {gpu.name}\nIRQ:   \t\t 0\nGPU UUID: \t {gpu.uuid}\n"
            f"Video BIOS: \t 96.00.99.00.01\nBus Type: \t PCIe\nDMA Size: \t 52 bits\n"
            f"DMA Mask: \t 0xfffffffffffff\nBus Location: \t {gpu.bus_id}\n"
            f"Device Minor: \t {gpu.minor}\nGPU Excluded:\t No\n"
        )
        if gpu.migs and gpu.mig_mode:
            for gi in range(1, len(gpu.migs) + 1):
                (root / f"proc/driver/nvidia/capabilities/gpu{gpu.minor}/mig/gi{gi}").mkdir(
                    parents=True, exist_ok=True
                )


def write_sysfs(root: pathlib.Path, gpus: Sequence[FakeGpu]) -> None:
    """The PCI functions of ``gpus``: H100s, 3D controllers (class 0x0302), with their NUMA node."""
    for gpu in gpus:
        write_pci_function(root, gpu.bus_id, 0x10DE, 0x2330, 0x030200, numa_node=gpu.numa_node)


def make_host(count: int, root: pathlib.Path) -> FakeHost:
    """A host with ``count`` H100 GPUs, told the same way by NVML, nvidia-smi and /proc."""
    gpus = fake_gpus(count)
    write_proc(root, gpus)
    write_sysfs(root, gpus)
    return FakeHost(
        root=os.fspath(root),
        commands={
            NVIDIA_SMI_ARGV: (0, nvidia_smi_output(gpus)),
            COMPUTE_MODE_ARGV: (0, compute_mode_output(gpus)),
        },
        modules={"pynvml": fake_pynvml(gpus)},
    )
