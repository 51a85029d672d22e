"""Fake AWS Neuron hosts: ``neuron-ls`` JSON and the driver's sysfs tree, as on a trn1 instance.

A trn1 device (Trainium1) has 2 NeuronCores, each its own logical core. ``neuron-ls`` is the
older release that knows only ``--json-output``: asked with ``--output-format json`` it exits 2,
as an older tool does, so both flags are exercised.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from accelkit.host import FakeHost

__all__ = ["NEW_FLAG", "OLD_FLAG", "bus_id", "make_host", "neuron_ls_json", "write_sysfs"]

NEW_FLAG = ("neuron-ls", "--output-format", "json")
OLD_FLAG = ("neuron-ls", "--json-output")
SYSFS = "sys/devices/virtual/neuron_device"
TRAINIUM1_MEMORY = 32 * 1024**3


def bus_id(device: int) -> str:
    """The PCI bus id of Neuron device ``device`` on the fake hosts, as neuron-ls prints it."""
    return f"{0x10 + 0x10 * (device // 4):02x}:{0x1C + device % 4:02x}.0"


def neuron_ls_json(cores: Sequence[int]) -> str:
    """``neuron-ls --json-output`` for devices with ``cores[n]`` NeuronCores each."""
    devices: list[dict[str, Any]] = [
        {
            "neuron_device": n,
            "bdf": bus_id(n),
            "connected_to": [m for m in ((n - 1) % len(cores), (n + 1) % len(cores)) if m != n],
            "nc_count": count,
            "memory_size": TRAINIUM1_MEMORY,
            "neuron_processes": [],
        }
        for n, count in enumerate(cores)
    ]
    return json.dumps(devices, indent=4)


def write_sysfs(root: Path, cores: Sequence[int], device_name: str = "Trainium1") -> None:
    """The driver's ``/sys/devices/virtual/neuron_device/neuron<N>`` tree for ``cores``."""
    for n, count in enumerate(cores):
        device = root / SYSFS / f"neuron{n}"
        (device / "info/architecture").mkdir(parents=True)
        (device / "core_count").write_text(f"{count}\n")
        (device / "connected_devices").write_text(f"{(n + 1) % len(cores)}\n")
        for name, value in (("device_name", device_name), ("arch_type", "NDv2")):
            (device / "info/architecture" / name).write_text(value + "\n")
        (device / "info/architecture/instance_type").write_text("Trn1\n")
        for core in range(count):
            (device / f"neuron_core{core}/info/architecture").mkdir(parents=True)
        numa = root / f"sys/bus/pci/devices/0000:{bus_id(n)}"
        numa.mkdir(parents=True)
        (numa / "numa_node").write_text(f"{0 if n < len(cores) / 2 else 1}\n")


def make_host(count: int, root: Path) -> FakeHost:
    """A trn1 host with ``count`` NeuronCores: devices of 2 cores, the last with 1 if odd."""
    cores = [2] * (count // 2) + [1] * (count % 2)
    if not cores:
        return FakeHost(root=root)
    write_sysfs(root, cores)
    rejected = "neuron-ls: error: unrecognized arguments: --output-format json\n"
    return FakeHost(
        root=root, commands={NEW_FLAG: (2, "", rejected), OLD_FLAG: (0, neuron_ls_json(cores))}
    )
