"""Reading and writing device-id lists in visibility variables.

Reading is tolerant (whitespace around tokens, empty tokens, the "nothing visible" sentinels);
writing never emits whitespace. Vendor-specific syntax (``level_zero:``, Neuron ranges) lives in
the plugins and uses these pieces.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Callable, Optional

__all__ = [
    "NOTHING_VISIBLE",
    "canonical_id",
    "checked_ids",
    "is_index",
    "join_ids",
    "relative_ids",
    "split_ids",
    "stacked_ids",
    "valid_prefix",
]

NOTHING_VISIBLE = ("", "NoDevFiles")
"""Values that conventionally mean "no device visible" (SLURM and Ray write ``NoDevFiles``)."""


def is_index(token: str) -> bool:
    """Whether ``token`` is a plain decimal id or index (``"0"``, ``"12"``): ASCII digits only.

    The one rule every family uses for numeric tokens: ``str.isdigit`` also accepts ``"²"`` and
    other Unicode digits, which no vendor runtime reads as a number.
    """
    return token.isascii() and token.isdecimal()


def canonical_id(token: str) -> str:
    """The device ``token`` names to every runtime: an index without its leading zeros (``"09"``
    and ``"9"`` are one GPU to CUDA, HIP and the others), any other token as it is."""
    return (token.lstrip("0") or "0") if is_index(token) else token


def split_ids(
    value: Optional[str], nothing: Sequence[str] = NOTHING_VISIBLE
) -> Optional[list[str]]:
    """``"0, 1,2"`` -> ``["0", "1", "2"]``; None (unset) stays None; a sentinel gives ``[]``.

    A sentinel means "nothing visible" only as the whole value. Among ids (``"NoDevFiles,0"``,
    what appending ids to a SLURM value gives) it is a token no runtime reads as a device, and
    the list ends there, as CUDA, HIP, ROCr and CANN end theirs at the first token they cannot
    read: ``"0,NoDevFiles,1"`` is ``["0"]``, and the marker never becomes a device id. Empty
    tokens are skipped (reading is tolerant); a family whose runtime stops at them says so in
    its own ``read_visible``.
    """
    if value is None:
        return None
    stripped = value.strip()
    if stripped in nothing:
        return []
    tokens: list[str] = []
    for token in (t.strip() for t in stripped.split(",")):
        if token and token in nothing:
            break
        if token:
            tokens.append(token)
    return tokens


def valid_prefix(
    tokens: Optional[Sequence[str]], valid: Callable[[str], object]
) -> Optional[list[str]]:
    """The tokens before the first one ``valid`` refuses (None stays None).

    CUDA, HIP, ROCr and CANN parse their lists this way: they stop at the first token they cannot
    read and use what came before, so ``"1,x,2"`` shows device 1 only. A family reading its
    variable as its runtime does passes its own token rule.
    """
    if tokens is None:
        return None
    prefix: list[str] = []
    for token in tokens:
        if not valid(token):
            break
        prefix.append(token)
    return prefix


def checked_ids(value: object, what: str) -> Optional[list[str]]:
    """A plugin's answer that should be ids (None or a list of strings), or ``ValueError``.

    A ``str`` is refused although it iterates: ``"01"`` would read as the ids "0" and "1".
    """
    if value is None:
        return None
    if not isinstance(value, (list, tuple)) or not all(isinstance(i, str) for i in value):
        raise ValueError(f"{what} gave {str(value)[:80]!r}, not a list of id strings or None")
    return list(value)


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
        if is_index(token):
            chosen.extend(base[int(token) : int(token) + 1])
        elif token in base:
            chosen.append(token)
    return chosen


def stacked_ids(
    base: Optional[Sequence[str]], tokens: Optional[Sequence[str]]
) -> Optional[list[str]]:
    """What two stacked variables show together: ``tokens`` read relative to ``base``.

    ROCr's list under HIP's, ``ZE_AFFINITY_MASK`` under the SYCL selector: either alone (the
    other unset, None) is the answer; both set is :func:`relative_ids`; neither set is None.
    """
    if base is None:
        return None if tokens is None else list(tokens)
    if tokens is None:
        return list(base)
    return relative_ids(base, tokens)
