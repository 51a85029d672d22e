"""``npu-smi info -m``: the space-aligned table that maps NPU and chip ids to logical ids."""

from __future__ import annotations

import re
from typing import Optional

from accelkit import note

__all__ = ["parse_aligned_table"]

_COLUMN_GAP = r"\t+|\s{2,}"
"""Columns of a space-aligned table are separated by a tab or two or more spaces, so a value
with single spaces ("Ascend 910B3", "Chip Logic ID") stays one cell."""


def parse_aligned_table(text: Optional[str], what: str) -> Optional[list[dict[str, str]]]:
    """Rows of a space-aligned table as ``{header: cell}``; the first non-blank line is the header.

    ``NPU ID   Chip ID   Chip Logic ID   Chip Name`` / ``0   1   -   Mcu`` gives
    ``[{"NPU ID": "0", "Chip ID": "1", "Chip Logic ID": "-", "Chip Name": "Mcu"}]``. A row with
    a different number of cells than the header is noted and skipped. None when ``text`` is None
    or has no usable row.
    """
    if text is None:
        return None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        note(f"{what} is empty", "warning")
        return None
    header = re.split(_COLUMN_GAP, lines[0])
    rows: list[dict[str, str]] = []
    for line in lines[1:]:
        cells = re.split(_COLUMN_GAP, line)
        if len(cells) != len(header):
            note(f"{what}: {line[:120]!r} has {len(cells)} columns, expected {header}", "warning")
            continue
        rows.append(dict(zip(header, cells)))
    if not rows:
        note(f"{what} has no usable rows under the header {header}", "warning")
        return None
    return rows
