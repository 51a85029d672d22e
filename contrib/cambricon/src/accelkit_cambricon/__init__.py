"""Cambricon MLUs (MLU370, MLU590, ...) for accelkit: experimental, community.

A process sees the MLUs its variables list, read as Cambricon's PyTorch backend reads them
(torch_mlu's ``_parse_visible_devices``, "Keep align with cnrt"): ``CN_VISIBLE_DEVICES`` first,
``MLU_VISIBLE_DEVICES`` only where it is unset, both unset is every MLU. A value that holds a
``-`` and is at least 36 characters long is a list of cndev UUIDs, split on ``,`` as written and
ending at the first token without a ``-``; any other value is a list of card indices, each token
stripped, ending at the first token that is not all (ASCII) digits (``""``, ``-1``, ``+3``,
``1gpu2``), ``01`` being card 1. A UUID or index named twice shows no MLU at all. An index is the
``N`` of ``cnmon``'s ``Card <N>`` and of the card's device file ``/dev/cambricon_dev<N>``
(``/dev/cambricon_ctl`` is the driver's control file, not a card); a UUID token names the card
whose UUID it is, exactly. A grant writes ``MLU_VISIBLE_DEVICES`` (as Ray's MLU manager does)
and unsets ``CN_VISIBLE_DEVICES``, which would otherwise override it. An MLU may be shared by
fractions, as on Ray. Frameworks name it ``mlu`` (``torch.mlu``), collectives use CNCL.

Detection: ``cnmon info`` (a ``Card <N>`` block per MLU with ``Product Name``, ``UUID``, the
``Physical Memory Usage`` ``Total`` and the ``PCI`` address), else the ``/dev/cambricon_dev<N>``
files, which give a count and no model. Sources, and what is not confirmed: the package's
README.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from itertools import takewhile
from typing import Optional

from accelkit import AcceleratorManager, Device, Frameworks, Host, hookimpl, note
from accelkit.detect import (
    detect_layers,
    is_index,
    numbered_files,
    parse_memory,
    run_command,
    sanitize_label,
)

VARIABLE = "MLU_VISIBLE_DEVICES"
FIRST = "CN_VISIBLE_DEVICES"  # read before MLU_VISIBLE_DEVICES where both are set
UUID_LIST = 36  # a value with a "-" and at least this long is a list of UUIDs (torch_mlu)
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
    "N, that cnmon's UUID is the cndev UUID a UUID list names, and that CNRT reads the variables "
    "as torch_mlu does; see accelkit-cambricon's README"
)


class CambriconManager(AcceleratorManager):
    """Cambricon MLUs: one ``MLU`` resource per card, shareable by fractions, by card index."""

    name = "cambricon"
    resource_name = "MLU"
    visible_devices_env_var = VARIABLE
    env_vars_read = (VARIABLE, FIRST)
    api_version = 2
    frameworks = Frameworks(device="mlu", collective="cncl")

    def read_visible(self, env: Mapping[str, str]) -> Optional[list[str]]:
        """As torch_mlu reads it: ``CN_VISIBLE_DEVICES`` where set, else ``MLU_VISIBLE_DEVICES``;
        a UUID list or an index list (see the module); an id named twice shows nothing."""
        first, own = env.get(FIRST), env.get(VARIABLE)
        if first is not None and own is not None and first != own:
            note(f"{FIRST}={first!r} overrides {VARIABLE}={own!r}", "warning")
        value = own if first is None else first
        if value is None:
            return None
        uuids = "-" in value and len(value) >= UUID_LIST
        ids = uuid_tokens(value) if uuids else index_tokens(value)
        return ids if len(set(ids)) == len(ids) else []  # "Repeated id results in empty set"

    def visibility_env(
        self, ids: Sequence[str], *, total: Optional[int] = None
    ) -> dict[str, Optional[str]]:
        """``MLU_VISIBLE_DEVICES``, with ``CN_VISIBLE_DEVICES`` unset: torch_mlu reads that one
        first, so one inherited from the node would override the grant."""
        return {**super().visibility_env(ids, total=total), FIRST: None}

    def detect(self, host: Host) -> list[Device]:
        """cnmon's card blocks, else the /dev/cambricon_dev<N> files."""
        note(UNCONFIRMED)
        return detect_layers(host, ("command", from_cnmon), ("devfs", from_devfs))


def uuid_tokens(value: str) -> list[str]:
    """The tokens of a UUID list as written, not stripped, up to the first without a ``-``
    (torch_mlu's ``parse_list_from_uuid``: one of them twice shows nothing), then up to the first
    holding a space: such a token names no MLU (cnmon's UUIDs hold none), and the list ends at the
    first token naming none (``_transform_uuid_to_ordinals``)."""
    listed = list(takewhile(lambda token: "-" in token, value.split(",")))
    if len(set(listed)) < len(listed):  # "Repeated id results in empty set"
        return []
    return list(takewhile(lambda token: not any(c.isspace() for c in token), listed))


def index_tokens(value: str) -> list[str]:
    """The card indices of an index list, each token stripped, up to the first that is not all
    ASCII digits (torch_mlu's ``_strtoul``: ``""``, ``-1``, ``+3`` and ``1gpu2`` end it; ``"²"``
    does too, which ``str.isdigit`` would take), written without leading zeros (``01`` is 1)."""
    digits = takewhile(is_index, (token.strip() for token in value.split(",")))
    return [number.lstrip("0").rjust(1, "0") for number in digits]  # int() refuses 5000 digits


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
