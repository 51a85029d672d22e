"""Reading and writing device-id lists in visibility variables.

Reading is tolerant (whitespace around tokens, empty tokens, the "nothing visible" sentinels);
writing never emits whitespace. Vendor-specific syntax (``level_zero:``, Neuron ranges) lives on
the managers and uses these pieces.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Optional

__all__ = [
    "MAX_RANGE_IDS",
    "NOTHING_VISIBLE",
    "format_ranges",
    "join_ids",
    "parse_ranges",
    "relative_ids",
    "split_ids",
]

NOTHING_VISIBLE = ("", "NoDevFiles")
"""Values that conventionally mean "no device visible" (SLURM and Ray write ``NoDevFiles``)."""

MAX_RANGE_IDS = 4096
"""The most ids one value's ranges may expand to: ``0-999999999`` is a typo, not a node."""


def split_ids(
    value: Optional[str], nothing: Sequence[str] = NOTHING_VISIBLE
) -> Optional[list[str]]:
    """``"0, 1,2"`` -> ``["0", "1", "2"]``; None (unset) stays None; a sentinel gives ``[]``."""
    if value is None:
        return None
    stripped = value.strip()
    if stripped in nothing:
        return []
    return [token.strip() for token in stripped.split(",") if token.strip()]


def join_ids(ids: Iterable[str]) -> str:
    """The variable value for ``ids``: comma-separated, no whitespace, order kept."""
    tokens = [str(i).strip() for i in ids]
    bad = [t for t in tokens if not t or "," in t or any(ch.isspace() for ch in t)]
    if bad:
        raise ValueError(f"device ids {bad!r} cannot be written into a visibility variable")
    return ",".join(tokens)


def relative_ids(base: Sequence[str], tokens: Iterable[str]) -> list[str]:
    """Ids a second, stacked variable selects from the first one's list ``base``.

    HIP reads its indices into ROCr's list, SYCL's selector into ``ZE_AFFINITY_MASK``'s: index
    ``i`` is the ``i``-th id of ``base``; a non-numeric token (a UUID) is kept if ``base`` has it.
    An index past the end selects nothing, so no combination of variables raises.
    """
    chosen: list[str] = []
    for token in tokens:
        if token.isdigit():
            chosen.extend(base[int(token) : int(token) + 1])
        elif token in base:
            chosen.append(token)
    return chosen


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
        if not low.isdigit() or (sep and not high.isdigit()):
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
