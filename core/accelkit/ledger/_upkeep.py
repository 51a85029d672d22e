"""Keeping a ledger's state true before each decision: holders that ended, steps whose grant went.

A grant is live exactly as long as its holder (a pid with its start time) runs, and every record
of an earlier boot is gone. A grant given back or reclaimed may have steps still running (a run
inside the grant, a pool worker's step): they are not dropped with it, since their processes
still use the devices, but become steps of the nearest grant above that is still held, or grants
of the node. Either way the devices they use stay counted exactly once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from accelkit.ledger._file import LedgerState, Record
from accelkit.ledger._holder import Holder, boot_id

__all__ = ["drop", "lineage", "reclaim"]


def reclaim(state: LedgerState) -> None:
    """Drop the grants and tickets of holders that ended (all of them after a reboot)."""
    if state.boot != boot_id():
        state.boot = boot_id()
        state.grants, state.queue = [], []
        state.changed = True
        return
    alive: dict[Holder, bool] = {}
    for entries in (state.grants, state.queue):
        for entry in entries:
            if entry.holder not in alive:
                alive[entry.holder] = entry.holder.alive()
    if all(alive.values()):
        return
    drop(state, [r for r in state.grants if not alive[r.holder]])
    state.queue = [t for t in state.queue if alive[t.holder]]
    state.changed = True


def drop(state: LedgerState, gone: Sequence[Record]) -> None:
    """Remove ``gone``; a step of a removed grant becomes a step of the nearest grant above it
    that is still held (or a grant of the node), so the devices it uses stay counted."""
    above = {r.token: r.parent for r in state.grants}
    removed = {r.token for r in gone}
    state.grants = [r for r in state.grants if all(r is not g for g in gone)]
    for record in state.grants:
        while record.parent is not None and record.parent in removed:
            record.parent = above.get(record.parent)
    state.changed = True


def lineage(state: LedgerState, token: Optional[int]) -> set[int]:
    """``token`` and the grants it is a step of, up to the node."""
    above = {r.token: r.parent for r in state.grants}
    chain: set[int] = set()
    while token is not None and token not in chain:
        chain.add(token)
        token = above.get(token)
    return chain
