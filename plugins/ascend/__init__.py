"""Huawei Ascend: NPUs, named by logical id.

``ASCEND_RT_VISIBLE_DEVICES`` takes *logical* ids: CANN numbers the chips a machine, VM or
container sees from 0 to N-1, and reads the list up to its first token that is not a plain
decimal id, a space included (``"0, 1"`` shows chip 0 only). ``ASCEND_VISIBLE_DEVICES`` is
the container runtime's layer (host physical ids, also the numbers of ``/dev/davinci<N>``), so
it is never read as logical ids. A request may take a fraction of one NPU.

Detection: pyACL in a probe process (its initialisation can block), else ``npu-smi info -m`` (the
NPU ID / Chip ID / Chip Logic ID / Chip Name table; a card's MCU has no logic id and is skipped),
else ``npu-smi info -l`` (chips per card), else the ``/dev/davinci<N>`` files. The last two give
no logic-id mapping, so they only *count* chips and number them 0..N-1 as CANN does. An Atlas A3
chip has one label whichever layer names it (``Ascend910C``; see ``A3_LABEL``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from types import ModuleType
from typing import Any, Callable, Optional

from accelkit import AcceleratorManager, Device, Frameworks, Host, hookimpl, note
from accelkit.detect import (
    call_probe,
    detect_layers,
    device_count,
    is_index,
    numbered_files,
    parse_colon_records,
    run_command,
    valid_prefix,
)

from .tables import parse_aligned_table

RUNTIME_VAR = "ASCEND_RT_VISIBLE_DEVICES"
CHIP_MAP = ("npu-smi", "info", "-m")
CARD_LIST = ("npu-smi", "info", "-l")
DEVICE_FILES = "/dev/davinci"  # + physical id; davinci_manager, devmm_svm, hisi_hdc are not chips
# Atlas A3 (Ascend 910C): pyACL names the SoC "Ascend910_93xx" (9391, 9392, 9382, ...) while
# npu-smi's chip map says "Ascend910" for each of the two chips an A3 NPU id has. Both layers
# give this one label (the exact SoC name stays the model, where pyACL gives it).
A3_SOC, A3_CHIP, A3_LABEL = r"Ascend910_93\d\d", "Ascend910", "Ascend910C"


class AscendManager(AcceleratorManager):
    """Huawei Ascend NPUs, shareable by fractions, named by logical id."""

    name = "ascend"
    resource_name = "NPU"
    api_version = 2
    visible_devices_env_var = RUNTIME_VAR
    env_vars_read = (RUNTIME_VAR, "ASCEND_VISIBLE_DEVICES")
    frameworks = Frameworks(device="npu", collective="hccl", shared_visibility=True)

    def read_visible(self, env: Mapping[str, str]) -> Optional[list[str]]:
        """The logical ids of ``ASCEND_RT_VISIBLE_DEVICES``, as CANN reads them."""
        return logical_ids(env.get(RUNTIME_VAR))

    def detect(self, host: Host) -> list[Device]:
        """pyACL in a probe process, else npu-smi's chip map, its card list, then /dev."""
        return detect_layers(
            host,
            ("library", from_acl),
            ("command", from_chip_map),
            ("command", from_card_list),
            ("devfs", from_devfs),
        )


def logical_ids(value: Optional[str]) -> Optional[list[str]]:
    """CANN's reading of a list: ids up to the first token that is not a plain decimal id (a
    space counts); None stays None."""
    return None if value is None else valid_prefix(value.split(","), is_index)


def soc_label(name: Optional[str], chips_per_npu: int = 1) -> Optional[str]:
    """The SoC name as pyACL reports it: npu-smi's "Ascend 910B3" is "Ascend910B3"; an A3 chip
    (pyACL's "Ascend910_9392", npu-smi's "Ascend910" two to an NPU id) is "Ascend910C"."""
    compact = "".join((name or "").split())
    if not compact:
        return None
    if re.fullmatch(A3_SOC, compact) or (compact == A3_CHIP and chips_per_npu == 2):
        return A3_LABEL
    return compact


def numbered(count: int) -> list[Device]:
    """Chips counted without a mapping: logical ids 0..count-1, as CANN numbers them."""
    return [Device(id=str(n)) for n in range(count)]


def probe_acl(import_module: Callable[[str], ModuleType]) -> dict[str, Any]:
    """In the probe process: pyACL's device count and SoC name, as plain data."""
    acl: Any = import_module("acl")
    acl.init()
    try:
        count, ret = acl.rt.get_device_count()
        if ret != 0:
            raise RuntimeError(f"acl.rt.get_device_count() failed with error code {ret}")
        return {"count": count, "soc": acl.get_soc_name()}
    finally:
        acl.finalize()


def from_acl(host: Host) -> Optional[list[Device]]:
    """pyACL counts the chips its process may use: under ASCEND_RT_VISIBLE_DEVICES, those ids."""
    found = call_probe(host, probe_acl, expect=dict, library="acl") or {}
    if not found:
        return None
    count = device_count(found.get("count"), "pyACL's device count")
    ids = [str(n) for n in range(count)]
    visible = logical_ids(host.env.get(RUNTIME_VAR))
    if visible is not None and len(visible) == count:
        ids = visible  # pyACL numbers the visible chips from 0; name them by logical id
    elif visible is not None:
        note(f"pyACL sees {count} NPU(s) but {RUNTIME_VAR}={host.env[RUNTIME_VAR]!r}", "warning")
    soc = found.get("soc") if isinstance(found.get("soc"), str) else None
    return [Device(id=i, model=soc, type_label=soc_label(soc)) for i in ids]


def from_chip_map(host: Host) -> Optional[list[Device]]:
    """One device per chip with a logic id in ``npu-smi info -m``, ordered by logic id."""
    rows = parse_aligned_table(run_command(host, CHIP_MAP), "`npu-smi info -m`")
    if rows is None or "Chip Logic ID" not in rows[0]:
        if rows is not None:
            note(f"`npu-smi info -m` has no 'Chip Logic ID' column: {list(rows[0])}", "warning")
        return None
    chips = [row for row in rows if is_index(row["Chip Logic ID"])]  # "-": a card's MCU
    per_npu = Counter(row.get("NPU ID") for row in chips)
    devices = [
        Device(id=str(int(logic)), model=name or None, type_label=soc_label(name, per_npu[npu]))
        for logic, name, npu in (
            (r["Chip Logic ID"], r.get("Chip Name"), r.get("NPU ID")) for r in chips
        )
    ]
    return sorted(devices, key=lambda d: int(d.id))


def from_card_list(host: Host) -> Optional[list[Device]]:
    """``npu-smi info -l``: the sum of each card's Chip Count (MCUs are not counted there)."""
    cards = parse_colon_records(run_command(host, CARD_LIST), "NPU ID", "`npu-smi info -l`")
    counts = [card.get("Chip Count", "") for card in cards or ()]
    if cards is None or not all(is_index(c) for c in counts):
        if cards is not None:
            note(f"`npu-smi info -l` has a card without a numeric Chip Count: {cards}", "warning")
        return None
    return numbered(device_count(sum(int(c) for c in counts), "npu-smi's total Chip Count"))


def from_devfs(host: Host) -> Optional[list[Device]]:
    """One chip per ``/dev/davinci<N>``; N is a physical id, so it is counted, never used."""
    files = numbered_files(host, DEVICE_FILES)
    if not files:
        return None
    note(f"{len(files)} /dev/davinci file(s) counted as logical ids 0..; npu-smi would give models")
    return numbered(len(files))


@hookimpl
def accelkit_register_managers() -> list[AcceleratorManager]:
    """The plugin's one manager, for every scheduler that loads accelkit."""
    return [AscendManager()]
