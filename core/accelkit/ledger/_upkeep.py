"""Keeping a ledger's state true before each decision: holders that ended, steps whose grant went.

A grant is live exactly as long as its holder (a pid with its start time) runs, and every record
of an earlier boot of this machine is gone. Grants of another machine's devices (a ledger on a
network file system, shared by several) are that machine's live grants, which this one can
neither check nor drop: it refuses the ledger (:class:`OtherMachine`).

A grant given back or reclaimed may have steps still running (a run inside the grant, a pool
worker's step): they are not dropped with it, since their processes still use the devices, but
become steps of the nearest grant above that is still held, or grants of the node. Either way
the devices they use stay counted exactly once.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Optional

from accelkit.errors import LedgerError
from accelkit.ledger._holder import Holder, boot_id
from accelkit.ledger._location import LEDGER_VAR
from accelkit.ledger._state import LedgerState, Record

__all__ = ["OtherMachine", "drop", "lineage", "reclaim"]


class OtherMachine(LedgerError):
    """The ledger at ``location`` holds grants of devices this machine does not have: another
    machine's (``devices`` names some), a ledger several machines share."""

    def __init__(self, location: str, devices: Sequence[str]) -> None:
        super().__init__(
            f"the ledger {location} holds grants of devices this machine does not have "
            f"({', '.join(devices)}), recorded under another boot: another machine's, which uses "
            "this ledger too (a file on a network file system). A ledger belongs to one "
            "machine, and one shared by several would let each hand out devices the others' "
            f"processes hold: give each machine its own on local storage ({LEDGER_VAR} may name "
            "the same path on each, on a local disk). If those devices were this machine's "
            f"before a reboot, remove the ledger: rm {location}"
        )


def reclaim(state: LedgerState, location: str, uuids: Callable[[], Collection[str]]) -> None:
    """Drop the grants and tickets of holders that ended (all of them after a reboot), and
    raise :class:`OtherMachine` for grants of another machine, recorded under another boot id.

    A boot id tells a reboot from the boot before it, not another machine from this one after
    a reboot: the devices do, by their UUIDs. Grants naming a UUID that ``uuids()`` (this
    machine's devices', asked only then) lacks are another machine's, whose holders may all
    still run; grants naming none (devices without UUIDs) read as this machine's.
    """
    if state.boot != boot_id():
        recorded = _uuids_of(state.grants)
        foreign = sorted(recorded - set(uuids())) if recorded else []
        if foreign:
            raise OtherMachine(location, foreign[:3])
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


def _uuids_of(records: Sequence[Record]) -> set[str]:
    """The device UUIDs the recorded grants name (a record that does not read as a grant is
    reported when it is used, not here)."""
    found = set()
    for record in records:
        for entry in record.grant.get("devices") or ():
            device = entry.get("device") if isinstance(entry, dict) else None
            uuid = device.get("uuid") if isinstance(device, dict) else None
            if isinstance(uuid, str) and uuid:
                found.add(uuid)
    return found


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
