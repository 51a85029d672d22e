"""FuriosaAI RNGD NPUs for accelkit: experimental, community.

A process sees the NPUs named in ``FURIOSA_DEVICES``, FuriosaRT's device specification: comma-
separated ``npu:<index>`` tokens (``npu:0,npu:3``), the notation ``furiosa-llm --devices`` takes
and Ray's Furiosa manager writes. ``npu:<index>:<cores>`` (``npu:0:0-3``) addresses cores of one
NPU and names that NPU here; a bare index is read as ``npu:<index>``. NPUs are granted whole.

Detection: ``furiosa_smi_py`` in a probe process (``list_devices()``, then each device's
``device_info()``: ``name()`` ``npu<N>``, ``arch()``, ``uuid()``, ``bdf()``), else the driver's
files: ``/dev/rngd/npu<N>...`` (one set per NPU, per core group) and the management directory
``/sys/class/rngd_mgmt/rngd!npu<N>mgmt`` (``busname``, ``device_uuid``). The type label is
Ray's, from the architecture: ``FURIOSA_RNGD``, ``FURIOSA_RNGDS``, ``FURIOSA_RNGDMAX``, ...; the
files do not tell the architecture, so that layer gives none. Sources, and what is not
confirmed: the package's README.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any, Callable, Optional

from accelkit import AcceleratorManager, Device, Host, hookimpl, note
from accelkit.detect import (
    NOTHING_VISIBLE,
    call_probe,
    decode,
    detect_layers,
    join_ids,
    read_value,
    split_ids,
)

VARIABLE = "FURIOSA_DEVICES"
PREFIX = "npu:"
TOKEN = re.compile(r"(?:npu:)?(\d+)(?::\d+(?:-\d+)?)?")  # npu:0, npu:0:0-3, 0
NPU_NAME = re.compile(r"npu(\d+)")
DEVICE_FILE = re.compile(r"/dev/rngd/npu(\d+)")
MANAGEMENT = "/sys/class/rngd_mgmt/rngd!npu{}mgmt"
UNCONFIRMED = (
    "not confirmed by FuriosaAI's documentation for RNGD: FURIOSA_DEVICES is documented for "
    "FuriosaRT 0.10 (Warboy); that RNGD runtimes read npu:<index> there, and that "
    'FURIOSA_DEVICES="" shows no NPU, follow Ray; that rngd_mgmt\'s busname and device_uuid are '
    "the bus id and UUID follows furiosa-smi-go code off its main branch; see the package's README"
)


class FuriosaManager(AcceleratorManager):
    """FuriosaAI NPUs: one ``FURIOSA`` resource per NPU, granted whole, named by index."""

    name = "furiosa"
    resource_name = "FURIOSA"
    visible_devices_env_var = VARIABLE
    fractional = False
    api_version = 2

    def read_visible(self, env: Mapping[str, str]) -> Optional[list[str]]:
        """The NPU indices of ``npu:<i>`` tokens (a core token ``npu:<i>:0-3`` names NPU i, a
        bare ``i`` is ``npu:i``), each once; the list ends at a token of another kind (an
        implicit ``rngd*2`` names no NPU)."""
        tokens = split_ids(env.get(VARIABLE), NOTHING_VISIBLE)
        if tokens is None:
            return None
        ids: list[str] = []
        for token in tokens:
            found = TOKEN.fullmatch(token)
            if found is None:
                break
            if str(int(found.group(1))) not in ids:
                ids.append(str(int(found.group(1))))
        return ids

    def visibility_env(
        self, ids: Sequence[str], *, total: Optional[int] = None
    ) -> dict[str, Optional[str]]:
        """``FURIOSA_DEVICES=npu:0,npu:3``, as furiosa-llm's ``--devices`` takes it."""
        return {VARIABLE: join_ids(PREFIX + i for i in ids)}

    def detect(self, host: Host) -> list[Device]:
        """furiosa_smi_py in a probe, else the driver's /dev/rngd files and rngd_mgmt sysfs."""
        note(UNCONFIRMED)
        return detect_layers(host, ("library", from_smi), ("devfs", from_devfs))


def probe_smi(import_module: Callable[[str], ModuleType]) -> list[dict[str, str]]:
    """In the probe process: each NPU's name, architecture, UUID and bus id, as plain data."""
    smi: Any = import_module("furiosa_smi_py")
    found = []
    for device in smi.list_devices():
        info = device.device_info()
        facts = {"name": info.name(), "arch": info.arch(), "uuid": info.uuid(), "bdf": info.bdf()}
        found.append({key: decode(str(value)) for key, value in facts.items()})
    return found


def from_smi(host: Host) -> Optional[list[Device]]:
    """One NPU per device furiosa_smi_py lists, named by the N of its name ``npu<N>``."""
    found = call_probe(host, probe_smi, expect=list, library="furiosa_smi_py")
    if found is None:
        return None
    devices = []
    for info in found:
        number = NPU_NAME.fullmatch(str(info.get("name")))
        if number is None:
            note(f"furiosa_smi_py names a device {info.get('name')!r}, not npu<N>", "warning")
            continue
        label = arch_label(info.get("arch"))
        uuid, bdf = info.get("uuid"), info.get("bdf")
        devices.append(Device(number.group(1), type_label=label, uuid=uuid, pci_bus_id=bdf))
    if found and not devices:  # devices named in a way not understood: no answer
        return None
    return sorted(devices, key=lambda d: int(d.id))


def arch_label(arch: Optional[str]) -> Optional[str]:
    """Ray's label for an architecture (``Arch.Rngd``, ``rngd-max``, ``rngd+``): ``FURIOSA_``
    and its letters and digits, upper case, ``+`` spelled ``plus``."""
    if arch is None:
        return None
    name = re.split(r"[:>\s]", arch.split(".")[-1])[0].replace("+", "plus")
    letters = "".join(ch for ch in name if ch.isalnum()).upper()
    return f"FURIOSA_{letters}" if letters else None


def from_devfs(host: Host) -> Optional[list[Device]]:
    """One NPU per N among ``/dev/rngd/npu<N>...``; bus id and UUID from its rngd_mgmt dir."""
    found = (DEVICE_FILE.match(path) for path in host.glob("/dev/rngd/npu*"))
    numbers = sorted({int(match.group(1)) for match in found if match})
    if not numbers:
        return None
    note("the RNGD architecture (FURIOSA_RNGD, ...) is not in /dev or sysfs: no type label")
    return [
        Device(
            str(number),
            pci_bus_id=read_value(host, MANAGEMENT.format(number) + "/busname"),
            uuid=read_value(host, MANAGEMENT.format(number) + "/device_uuid"),
        )
        for number in numbers
    ]


@hookimpl
def accelkit_register_managers() -> list[AcceleratorManager]:
    """The plugin's one manager, for every scheduler that loads accelkit."""
    return [FuriosaManager()]
