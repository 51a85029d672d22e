"""Cambricon MLUs (MLU370, MLU590, ...) for accelkit: experimental, community.

A process sees the MLUs listed in ``MLU_VISIBLE_DEVICES``, comma-separated card indices, as
Cambricon's runtime (CNRT, torch_mlu) reads it and Ray's MLU manager writes it. An index is the
``N`` of ``cnmon``'s ``Card <N>`` and of the card's device file ``/dev/cambricon_dev<N>``
(``/dev/cambricon_ctl`` is the driver's control file, not a card). An MLU may be shared by
fractions, as on Ray. Frameworks name it ``mlu`` (``torch.mlu``), collectives use CNCL.

Detection: ``cnmon info`` (a ``Card <N>`` block per MLU with ``Product Name``, ``UUID``, the
``Physical Memory Usage`` ``Total`` and the ``PCI`` address), else the ``/dev/cambricon_dev<N>``
files, which give a count and no model. Sources, and what is not confirmed: the package's
README.
"""

from __future__ import annotations

import re
from typing import Optional

from accelkit import AcceleratorManager, Device, Frameworks, Host, hookimpl, note
from accelkit.detect import detect_layers, numbered_files, parse_memory, run_command, sanitize_label

VARIABLE = "MLU_VISIBLE_DEVICES"
INFO = ("cnmon", "info")
DEVICE_FILES = "/dev/cambricon_dev"
CARD = re.compile(r"^\s*Card\s+(\d+)\s*$", re.MULTILINE)
PRODUCT = re.compile(r"Product Name\s*:\s*(.+)")
UUID = re.compile(r"UUID\s*:\s*(\S+)")
MEMORY = re.compile(r"Physical Memory Usage\s*:\s*\n\s*Total\s*:\s*(.+)")
PCI = re.compile(
    r"Domain ID\s*:\s*(\w+)\s*\n\s*Bus num\s*:\s*(\w+)\s*\n\s*Device\s*:\s*(\w+)\s*\n"
    r"\s*Function\s*:\s*(\w+)"
)
UNCONFIRMED = (
    "not confirmed by Cambricon's documentation (cnmon's layout is read from tools that parse "
    "it): that MLU_VISIBLE_DEVICES indices are cnmon's card numbers and /dev/cambricon_dev<N>'s "
    "N, and how the runtime reads spaces or invalid tokens; see accelkit-cambricon's README"
)


class CambriconManager(AcceleratorManager):
    """Cambricon MLUs: one ``MLU`` resource per card, shareable by fractions, by card index."""

    name = "cambricon"
    resource_name = "MLU"
    visible_devices_env_var = VARIABLE
    api_version = 2
    frameworks = Frameworks(device="mlu", collective="cncl")

    def detect(self, host: Host) -> list[Device]:
        """cnmon's card blocks, else the /dev/cambricon_dev<N> files."""
        note(UNCONFIRMED)
        return detect_layers(host, ("command", from_cnmon), ("devfs", from_devfs))


def from_cnmon(host: Host) -> Optional[list[Device]]:
    """One MLU per ``Card <N>`` block of ``cnmon info``, in card order."""
    text = run_command(host, INFO)
    if text is None:
        return None
    parts = CARD.split(text)  # [before, N, block, N, block, ...]
    devices = [card(int(number), block) for number, block in zip(parts[1::2], parts[2::2])]
    if not devices:  # a text not understood (or none) is no answer: the device files are asked
        if text.strip():
            note(f"cnmon info printed no Card <N> block: {' '.join(text.split())[:160]}", "warning")
        return None
    return sorted(devices, key=lambda d: int(d.id))


def card(number: int, block: str) -> Device:
    """The MLU one ``Card <N>`` block describes; a field it lacks stays empty."""
    product, uuid = PRODUCT.search(block), UUID.search(block)
    memory, pci = MEMORY.search(block), PCI.search(block)
    model = product.group(1).strip() if product else None
    return Device(
        str(number),
        model=model,
        type_label=sanitize_label(model),
        uuid=uuid.group(1) if uuid else None,
        memory_bytes=parse_memory(memory.group(1)) if memory else None,
        pci_bus_id="{}:{}:{}.{}".format(*pci.groups()) if pci else None,
    )


def from_devfs(host: Host) -> Optional[list[Device]]:
    """One MLU per ``/dev/cambricon_dev<N>``: a count, in card order, without a model."""
    files = numbered_files(host, DEVICE_FILES)
    if not files:
        return None
    note(f"{len(files)} MLU(s) counted from /dev/cambricon_dev<N>; cnmon would name them")
    return [Device(str(number)) for number, _path in files]


@hookimpl
def accelkit_register_managers() -> list[AcceleratorManager]:
    """The plugin's one manager, for every scheduler that loads accelkit."""
    return [CambriconManager()]
