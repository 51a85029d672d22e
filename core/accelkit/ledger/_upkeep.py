"""Keeping a ledger's state true before each decision: holders that ended, steps whose grant went.

A grant is live exactly as long as its holder (a pid with its start time) runs, and every record
of an earlier boot of this machine is gone. Records another machine wrote (a ledger on a network
file system, shared by several) are that machine's live grants, which this one can neither
check nor drop: it refuses the ledger (:class:`OtherMachine`).

A grant given back or reclaimed may have steps still running (a run inside the grant, a pool
worker's step): they are not dropped with it, since their processes still use the devices, but
become steps of the nearest grant above that is still held, or grants of the node. Either way
the devices they use stay counted exactly once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from accelkit.errors import LedgerError
from accelkit.ledger._holder import Holder, boot_id, host_name
from accelkit.ledger._location import LEDGER_VAR
from accelkit.ledger._state import LedgerState, Record

__all__ = ["OtherMachine", "drop", "lineage", "reclaim"]


class OtherMachine(LedgerError):
    """The ledger at ``location`` holds grants or waiting requests another machine, ``host``,
    wrote: what it means and what to do."""

    def __init__(self, location: str, host: str) -> None:
        super().__init__(
            f"the ledger {location} holds grants of another machine, {host} (this one is "
            f"{host_name()}): a ledger belongs to one machine, and one shared by several (on a "
            "network file system) would let each hand out devices the others' processes hold. "
            f"Give each machine its own ledger on local storage (e.g. {LEDGER_VAR}=/var/tmp/"
            f"accelkit-$(hostname).json); if {host} was this machine's name before a reboot, "
            f"remove the ledger: rm {location}"
        )


def reclaim(state: LedgerState, location: str) -> None:
    """Drop the grants and tickets of holders that ended (all of them after a reboot), and
    raise :class:`OtherMachine` for records of another machine (under another boot id and
    another host name; a file before version 4 names no host, and reads as this machine's).
    ``location`` names the ledger in that error."""
    if state.boot != boot_id():
        writer = state.host
        if (state.grants or state.queue) and writer is not None and writer != host_name():
            raise OtherMachine(location, writer)
        state.boot, state.host = boot_id(), host_name()
        state.grants, state.queue = [], []
        state.changed = True
        return
    state.host = host_name()  # written with the next change (a file before version 4 has none)
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
