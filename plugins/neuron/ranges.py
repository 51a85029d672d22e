"""``NEURON_RT_VISIBLE_CORES`` syntax: core ids as inclusive ranges (``0-3,6``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Optional

from accelkit.detect import NOTHING_VISIBLE, is_index, split_ids

__all__ = ["MAX_RANGE_IDS", "format_ranges", "parse_ranges"]

MAX_RANGE_IDS = 4096
"""The most ids one value's ranges may expand to: ``0-999999999`` is a typo, not a node."""


def parse_ranges(
    value: Optional[str], nothing: Sequence[str] = NOTHING_VISIBLE
) -> Optional[list[str]]:
    """``"0-3,6"`` -> ``["0", "1", "2", "3", "6"]``; raises ``ValueError`` on a malformed token
    or ranges spanning more than :data:`MAX_RANGE_IDS` ids."""
    tokens = split_ids(value, nothing)
    if tokens is None:
        return None
    ids: list[str] = []
    for token in tokens:
        low, sep, high = (part.strip() for part in token.partition("-"))
        if not is_index(low) or (sep and not is_index(high)):
            raise ValueError(f"{token!r} in {value!r} is neither a number nor a range like 0-3")
        first, last = int(low), int(high) if sep else int(low)
        if last < first:
            raise ValueError(f"range {token!r} in {value!r} runs backwards")
        if len(ids) + last - first + 1 > MAX_RANGE_IDS:
            raise ValueError(
                f"{value!r} spans more than {MAX_RANGE_IDS} ids; no node has that many"
            )
        ids.extend(str(n) for n in range(first, last + 1))
    return ids


def format_ranges(ids: Iterable[str]) -> str:
    """``["2", "3", "4", "7"]`` -> ``"2-4,7"``: numeric ids as sorted inclusive ranges."""
    numbers = sorted({int(i) for i in ids})
    parts: list[str] = []
    start = None
    for n, following in zip(numbers, [*numbers[1:], None]):
        start = n if start is None else start
        if following != n + 1:
            parts.append(str(n) if start == n else f"{start}-{n}")
            start = None
    return ",".join(parts)
