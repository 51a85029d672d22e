"""Fake AWS Neuron hosts: ``neuron-ls`` JSON and the driver's sysfs tree, as on trn1 and trn2.

A trn1 device (Trainium1) has 2 NeuronCores, each its own logical core. ``neuron-ls`` is the
older release that knows only ``--json-output``: asked with ``--output-format json`` it exits 2,
as an older tool does, so both flags are exercised. A trn2 device (Trainium2) has 8 physical
cores, grouped 2 to a logical core by default (LNC=2): the newer ``neuron-ls`` prints logical
counts (``nc_count`` 4, ``neuroncore_ids``), while sysfs keeps the physical ``core_count`` 8.

``make_host`` is this family's backdoor for the conformance kit, declared in the entry-point
group ``accelkit.testing`` (in accelkit's ``pyproject.toml``) as a third-party plugin declares
its own.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from accelkit import FakeHost

__all__ = [
    "NEW_FLAG",
    "OLD_FLAG",
    "bus_id",
    "make_host",
    "neuron_ls_json",
    "neuron_ls_output_json",
    "trn2_host",
    "write_sysfs",
]

NEW_FLAG = ("neuron-ls", "--output-format", "json")
OLD_FLAG = ("neuron-ls", "--json-output")
SYSFS = "sys/devices/virtual/neuron_device"
TRAINIUM1_MEMORY = 32 * 1024**3
TRAINIUM2_MEMORY = 96 * 1024**3


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


def neuron_ls_output_json(logical_cores: Sequence[int], lnc: int, instance_type: str) -> str:
    """``neuron-ls --output-format json``: instance fields, then devices whose ``nc_count`` and
    ``neuroncore_ids`` count logical cores (numbered across devices) under ``lnc``."""
    devices: list[dict[str, Any]] = []
    first = 0
    for n, count in enumerate(logical_cores):
        devices.append(
            {
                "neuron_device": n,
                "bdf": bus_id(n),
                "nc_count": count,
                "neuroncore_ids": list(range(first, first + count)),
                "memory_size": TRAINIUM2_MEMORY,
                "neuron_processes": [],
            }
        )
        first += count
    instance = {"instance_type": instance_type, "logical_neuroncore_config": lnc}
    return json.dumps({**instance, "neuron_devices": devices}, indent=4)


def trn2_host(root: Path, devices: int = 16, lnc: int = 2) -> FakeHost:
    """A trn2.48xlarge: ``devices`` Trainium2 devices of 8 physical cores, at LNC ``lnc``
    (set in the environment unless it is the default 2)."""
    write_sysfs(root, [8] * devices, device_name="Trainium2")
    listed = neuron_ls_output_json([8 // lnc] * devices, lnc, "trn2.48xlarge")
    env = {} if lnc == 2 else {"NEURON_LOGICAL_NC_CONFIG": str(lnc)}
    return FakeHost(root=root, env=env, commands={NEW_FLAG: (0, listed)})


def write_sysfs(root: Path, cores: Sequence[int], device_name: str = "Trainium1") -> None:
    """The driver's ``/sys/devices/virtual/neuron_device/neuron<N>`` tree for ``cores``."""
    for n, count in enumerate(cores):
        device = root / SYSFS / f"neuron{n}"
        (device / "info/architecture").mkdir(parents=True)
        (device / "core_count").write_text(f"{count}\n")
        (device / "connected_devices").write_text(f"{(n + 1) % len(cores)}\n")
        for name, value in (("device_name", device_name), ("arch_type", "NDv2")):
            (device / "info/architecture" / name).write_text(value + "\n")
        instance = "Trn2" if device_name == "Trainium2" else "Trn1"
        (device / "info/architecture/instance_type").write_text(instance + "\n")
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
