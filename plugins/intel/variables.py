"""Which Intel GPUs a process sees: ``ZE_AFFINITY_MASK`` read as Level Zero reads it, then
``ONEAPI_DEVICE_SELECTOR`` as SYCL reads it, relative to the mask's list.

Ids are root-device ordinals under the effective ``ZE_FLAT_DEVICE_HIERARCHY``. The mask names root
devices, or ``card.stack``: where stacks are root devices (FLAT, the default, and COMBINED, where
SYCL still lists stacks) Level Zero skips such an entry; in COMPOSITE mode it shows its card with
that stack alone, which is not offered (a grant unsets the mask, and would show the whole card). The
selector's terms are joined by ``;``; a term names a backend (``level_zero``, ``*``, or none in the
bare lists accepted on read) and devices (ordinals, ``*`` or ``gpu`` for all; ``cpu``, ``fpga`` and
``acc`` name none). A ``!`` term discards what it names from what the other terms accept, and a
selector of discard terms alone starts from every device (SYCL reads it as if ``*:*`` came first):
which devices remain then depends on how many Level Zero counts, which the manager's ``detect()``
keeps. Either variable set to ``""`` is no restriction, as both runtimes read it (unlike CUDA).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Optional

from accelkit import note
from accelkit.detect import NOTHING_VISIBLE, is_index, split_ids, stacked_ids

__all__ = ["HIERARCHIES", "STACKS_ARE_ROOTS", "hierarchy", "visible_root_devices"]

# Hierarchies in which SYCL (whose numbering ONEAPI_DEVICE_SELECTOR uses) lists each stack as a
# root device: FLAT, and COMBINED, where Level Zero itself shows cards but SYCL still shows stacks.
STACKS_ARE_ROOTS = ("FLAT", "COMBINED")
HIERARCHIES = (*STACKS_ARE_ROOTS, "COMPOSITE")
MASK_ID = r"^[0-9]+(\.[0-9]+)?$"  # a device or device.stack; no selector syntax
ALL_GPUS = {"*", "gpu"}  # selector device tokens that name every GPU of a backend
NO_GPU = {"cpu", "fpga", "acc"}  # selector device types that name no GPU


def visible_root_devices(
    env: Mapping[str, str], root_devices: Optional[int]
) -> Optional[list[str]]:
    """The root devices the mask and the selector leave visible: None for every one.
    ``root_devices`` is how many Level Zero counts (None: not counted); a selector that
    discards from every device without it raises ``ValueError``, never read as "all". A card
    the mask shows with some of its stacks only (COMPOSITE mode) keeps its place among the
    mask's devices, which the selector counts, but is never among those left visible."""
    shown = _selected(env, root_devices)
    partial = partial_cards(env)
    return shown if shown is None else [token for token in shown if token not in partial]


def _selected(env: Mapping[str, str], root_devices: Optional[int]) -> Optional[list[str]]:
    """The mask's devices that the selector accepts and does not discard (None: all)."""
    mask = affinity_mask(env)
    accepted, discarded = selector_terms(env.get("ONEAPI_DEVICE_SELECTOR"))
    if not discarded:
        return stacked_ids(mask, accepted)
    if ALL_GPUS & set(discarded):
        return stacked_ids(mask, [])
    if accepted is None:
        accepted = [str(n) for n in range(_roots_counted(mask, root_devices))]
    gone = {int(token) for token in discarded if is_index(token)}
    return stacked_ids(mask, [t for t in accepted if not (is_index(t) and int(t) in gone)])


def _roots_counted(mask: Optional[list[str]], root_devices: Optional[int]) -> int:
    """How many root devices the selector's ordinals count over: the mask's, else all."""
    if mask is not None:
        return len(mask)
    if root_devices is None:
        raise ValueError(
            "a selector of discard terms alone leaves every device it does not name, and how "
            "many there are is known only once the node is detected"
        )
    return root_devices


def hierarchy(env: Mapping[str, str]) -> str:
    """The effective ``ZE_FLAT_DEVICE_HIERARCHY``: FLAT unless it is one of Level Zero's three
    names, spelt exactly (compute-runtime compares them as they are: ``composite`` is FLAT)."""
    value = env.get("ZE_FLAT_DEVICE_HIERARCHY", "")
    return value if value in HIERARCHIES else "FLAT"


def affinity_mask(env: Mapping[str, str]) -> Optional[list[str]]:
    """The root devices ``ZE_AFFINITY_MASK`` names, in Level Zero's order, ``card.stack`` entries
    left out (see the module); None when it is unset or empty.

    The mask only enables devices: Level Zero lists those it enables in their own (PCI) order,
    each once, whatever order and repeats the mask has, and skips an entry past its device count
    (compute-runtime's ``parseAffinityMask``), so ``3,2`` shows stack 2 first. An empty mask is
    no mask there."""
    mask = _mask_entries(env)
    if mask is None:
        return None
    stacks = [t for t in mask if "." in t]
    composite = hierarchy(env) == "COMPOSITE"
    if stacks and composite:
        note(
            f"ZE_AFFINITY_MASK names stacks ({', '.join(stacks)}): each shows its card with "
            "one stack, which is not offered (name whole cards, or use FLAT mode)",
            "warning",
        )
    shown = mask if composite else [t for t in mask if "." not in t]  # FLAT skips card.stack
    ordinals = {int(t.partition(".")[0]) for t in shown}
    return [str(n) for n in sorted(ordinals)]


def partial_cards(env: Mapping[str, str]) -> set[str]:
    """The cards ``ZE_AFFINITY_MASK`` shows with some stacks only: in COMPOSITE mode, a card it
    names by ``card.stack`` entries alone (``0.1``; ``0`` beside it shows the whole card)."""
    mask = _mask_entries(env)
    if mask is None or hierarchy(env) != "COMPOSITE":
        return set()
    whole = {t for t in mask if "." not in t}
    return {t.partition(".")[0] for t in mask if "." in t} - whole


def _mask_entries(env: Mapping[str, str]) -> Optional[list[str]]:
    """The mask's well-formed entries (``N`` or ``N.M``) as written, ``N`` without leading zeros;
    None when the mask is unset or empty."""
    value = env.get("ZE_AFFINITY_MASK")
    mask = None if value == "" else split_ids(value)
    if mask is None:
        return None
    entries = [t for t in mask if re.match(MASK_ID, t)]
    return [f"{int(card)}{dot}{stack}" for card, dot, stack in (t.partition(".") for t in entries)]


def selector_terms(value: Optional[str]) -> tuple[Optional[list[str]], list[str]]:
    """(accepted, discarded): the Level Zero tokens of a selector's terms and of its ``!``
    terms. Accepted is None for every device: no selector or an empty one (SYCL and the unified
    runtime read ``""`` as accepting everything), a term of ``*`` or ``gpu``, or discard terms
    alone; [] when the accepting terms name other backends only, or for ``NoDevFiles``."""
    if value is None or value == "":
        return None, []
    if value.strip() in NOTHING_VISIBLE:
        return [], []
    accepted: list[str] = []
    discarded: list[str] = []
    accepts_any = False
    for term in value.split(";"):
        discard = term.strip().startswith("!")
        backend, _, tokens = term.strip().lstrip("!").rpartition(":")
        accepts_any = accepts_any or not discard
        if backend.strip().lower() in ("", "*", "level_zero"):
            named = [t for t in split_ids(tokens, ()) or [] if t.lower() not in NO_GPU]
            (discarded if discard else accepted).extend(named)
    if not accepts_any or ALL_GPUS & set(accepted):
        return None, discarded
    return accepted, discarded
