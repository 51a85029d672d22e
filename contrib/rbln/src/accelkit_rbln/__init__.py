"""Rebellions RBLN NPUs (ATOM, ATOM+, ATOM-Max, REBEL) for accelkit: experimental, community.

A process sees the NPUs listed in ``RBLN_DEVICES``, comma-separated device indices (``0,3``): the
variable Ray's RBLN manager writes and vllm-rbln declares as its platform's device control
variable. NPUs are granted whole, as Ray grants them. An index is the ``N`` of the NPU's device
file ``/dev/rbln<N>``, which ``rbln-smi -j`` reports as the device ``rbln<N>``. Frameworks name
them ``rbln`` (torch-rbln's ``torch.rbln``), and collectives use torch-rbln's ``rbln-ccl``
backend for ``torch.distributed``.

Detection: the ``rebel`` library in a probe process (``rebel.device_count()`` and
``rebel.get_npu_name(i)``, with ``RBLN_DEVICES`` lifted so every NPU is counted), else the JSON
of ``rbln-smi -j`` (``rbln-stat -j``, its deprecated name, on older drivers), else the
``/dev/rbln<N>`` files, which give a count and no model. Sources, and what is not confirmed:
the package's README.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import ModuleType
from typing import Any, Callable, Optional

from accelkit import AcceleratorManager, Device, Frameworks, Host, Scheduling, hookimpl, note
from accelkit.detect import (
    call_probe,
    decode,
    detect_layers,
    device_count,
    find_field,
    first_records,
    is_index,
    numbered_files,
    parse_memory,
    sanitize_label,
)

VARIABLE = "RBLN_DEVICES"
SMI_COMMANDS = (("rbln-smi", "-j"), ("rbln-stat", "-j"))
DEVICE_FILES = "/dev/rbln"
DEVICE_NAME = re.compile(r"rbln(\d+)")
UNCONFIRMED = (
    "not confirmed by Rebellions' documentation: that RBLN_DEVICES takes the N of /dev/rbln<N> "
    '(Ray and vllm-rbln write indices 0..n-1), and that RBLN_DEVICES="" shows no NPU (Ray reads '
    "it so); see accelkit-rbln's README"
)


class RblnManager(AcceleratorManager):
    """Rebellions NPUs: one ``RBLN`` resource per NPU, granted whole, named by device index."""

    name = "rbln"
    resource_name = "RBLN"
    visible_devices_env_var = VARIABLE
    fractional = False
    api_version = 2
    scheduling = Scheduling(device_file="/dev/rbln{id}")
    # torch-rbln registers torch.rbln ("rbln:0") and the c10d backend "rbln-ccl" (docs.rbln.ai)
    frameworks = Frameworks(device="rbln", collective="rbln-ccl")

    def detect(self, host: Host) -> list[Device]:
        """The rebel library in a probe, else rbln-smi's JSON, else the /dev/rbln<N> files."""
        note(UNCONFIRMED)
        return detect_layers(
            host, ("library", from_rebel), ("command", from_smi), ("devfs", from_devfs)
        )


def probe_rebel(import_module: Callable[[str], ModuleType]) -> list[str]:
    """In the probe process: the name of every NPU rebel counts, in index order."""
    rebel: Any = import_module("rebel")
    count = device_count(rebel.device_count(), "rebel.device_count()")
    return [decode(rebel.get_npu_name(index)) for index in range(count)]


def from_rebel(host: Host) -> Optional[list[Device]]:
    """rebel numbers the NPUs 0..n-1; RBLN_DEVICES is lifted in the probe so it counts all."""
    names = call_probe(host, probe_rebel, expect=list, env={VARIABLE: None}, library="rebel")
    if names is None:
        return None
    models = [name if isinstance(name, str) else None for name in names]
    return [Device(str(i), model=m, type_label=sanitize_label(m)) for i, m in enumerate(models)]


def from_smi(host: Host) -> Optional[list[Device]]:
    """One NPU per device record of rbln-smi's JSON, in index order."""
    records = first_records(host, *SMI_COMMANDS)
    if records is None:
        return None
    devices = []
    for record in records:
        index = device_index(record)
        if index is None:
            note(f"rbln-smi lists a device without an index: {str(dict(record))[:160]}", "warning")
            continue
        name = find_field(record, "name")
        model = str(name) if name else None
        devices.append(
            Device(
                index,
                model=model,
                type_label=sanitize_label(model),
                uuid=find_field(record, "uuid"),
                pci_bus_id=find_field(record, "bus_id"),
                memory_bytes=parse_memory(str(find_field(record, "total")), "B"),
            )
        )
    if records and not devices:  # records of a shape not understood: no answer
        return None
    return sorted(devices, key=lambda d: int(d.id))


def device_index(record: Mapping[str, Any]) -> Optional[str]:
    """The N of the record's device ``rbln<N>``, else its ``npu`` index (a string in SDK 1.x,
    a number from SDK 2.0); None when it has neither."""
    found = DEVICE_NAME.fullmatch(str(record.get("device", "")))
    index = found.group(1) if found else str(record.get("npu", ""))
    return str(int(index)) if is_index(index) else None


def from_devfs(host: Host) -> Optional[list[Device]]:
    """One NPU per ``/dev/rbln<N>``: a count, in index order, without a model."""
    files = numbered_files(host, DEVICE_FILES)
    if not files:
        return None
    note(f"{len(files)} NPU(s) counted from /dev/rbln<N>; rbln-smi or rebel would name them")
    return [Device(str(number)) for number, _path in files]


@hookimpl
def accelkit_register_managers() -> list[AcceleratorManager]:
    """The plugin's one manager, for every scheduler that loads accelkit."""
    return [RblnManager()]
