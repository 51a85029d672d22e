"""Parsers for vendor tools' human-formatted text: aligned tables, ``key : value`` records, sizes.

Some vendor tools have no JSON or CSV mode for the facts we need (``npu-smi info -l`` and
``/proc/driver/nvidia/gpus/*/information`` print ``key : value`` records, ``hl-smi`` prints
memory as ``98304 MiB``). These helpers read such text leniently and never raise: a line they
cannot use is noted through :func:`accelkit.note` and skipped, and when nothing usable is left
they return None, so a garbled output falls through to the next detection layer.
"""

from __future__ import annotations

import re
from typing import Optional

from accelkit.detect._bounds import lines
from accelkit.device import MAX_DEVICES
from accelkit.diagnostics import note

__all__ = [
    "parse_colon_records",
    "parse_memory",
]

_MEMORY = r"(?i)^\s*(\d+(?:\.\d+)?)\s*([KMGT]?i?B)?\s*$"
_MEMORY_UNITS = {
    "b": 1,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
    "tib": 1 << 40,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
}


def parse_colon_records(
    text: Optional[str], first_key: str, what: str
) -> Optional[list[dict[str, str]]]:
    """``key : value`` lines grouped into records; a line whose key is ``first_key`` starts one.

    Lines before the first record (``Total Count : 8``) and lines without a colon are ignored;
    keys and values are stripped. None when ``text`` is None or holds no record. At most
    :data:`~accelkit.device.MAX_DEVICES` records are kept, of the first lines of the text
    (:func:`accelkit.detect._bounds.lines`): reading stops there, with a note.
    """
    if text is None:
        return None
    records: list[dict[str, str]] = []
    for line in lines(text, what):
        key, colon, value = (part.strip() for part in line.partition(":"))
        if not colon or not key:
            continue
        if key == first_key:
            if len(records) == MAX_DEVICES:
                note(f"{what} has more than {MAX_DEVICES} records; keeping the first", "error")
                break
            records.append({})
        if records:
            records[-1][key] = value
    if not records:
        note(f"{what} has no {first_key!r} records", "warning")
        return None
    return records


def parse_memory(text: Optional[str], default_unit: str = "MiB") -> Optional[int]:
    """Bytes in a memory size such as ``98304 MiB``, ``96 GiB`` or ``98304``; None if unreadable.

    ``KiB``/``MiB``/... are binary, ``KB``/``MB``/... decimal; a bare number is in ``default_unit``.
    """
    match = re.match(_MEMORY, text or "")
    if match is None:
        return None
    unit = (match.group(2) or default_unit).lower()
    number = match.group(1)
    if "." not in number:
        return int(number) * _MEMORY_UNITS[unit]
    from fractions import Fraction  # exact ``1.5 GiB``; loaded only when a size has a fraction

    return int(Fraction(number) * _MEMORY_UNITS[unit])
