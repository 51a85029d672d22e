"""What a ledger shows people: the live grants with their holders, and the requests waiting.

Built only when someone asks (``accelkit ps``, a request that has to wait, ``accelkit env``
naming who holds its devices), so taking a free grant never pays for these records.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

if TYPE_CHECKING:
    from accelkit.ledger._holder import Holder
    from accelkit.ledger._state import LedgerState, Record
    from accelkit.schedule._grant import Grant

__all__ = ["Holding", "LedgerView", "WaitReporter", "Waiting", "view_of"]


@dataclass(frozen=True)
class Holding:
    """A live grant and the process holding it, since ``since`` (epoch seconds); the uid that
    took it (None when the ledger did not record it), the grant it is a step of (None: a grant
    of the node), and the holder's note, if it gave one."""

    grant: Grant
    holder: Holder
    since: float
    user: Optional[int] = None
    parent: Optional[int] = None
    note: Optional[str] = None


@dataclass(frozen=True)
class Waiting:
    """A request waiting its turn: ``ticket`` is its place in arrival order; ``parent`` the
    grant it waits to take a step of (None: the node); ``sees`` the devices it could take
    there, as ``(family, id)``, when its process sees only some (None: every one)."""

    ticket: int
    holder: Holder
    wants: str
    since: float
    user: Optional[int] = None
    parent: Optional[int] = None
    sees: Optional[tuple[tuple[str, str], ...]] = None


@dataclass(frozen=True)
class LedgerView:
    """What the ledger holds at one moment: live grants and waiting requests, in order."""

    path: Path
    node: Optional[str]
    holdings: tuple[Holding, ...]
    waiting: tuple[Waiting, ...]


WaitReporter = Callable[[LedgerView], None]
"""Told once, when a request starts to wait, what it waits for: the holders, and the requests
ahead of it (``accelkit run`` prints it)."""


def view_of(
    state: LedgerState, path: Path, grant_of: Callable[[Record], Grant], before: Optional[int]
) -> LedgerView:
    """The state as a view (``grant_of`` reads a record's grant); ``before``: only the tickets
    ahead of that one in its queue (the node's, or one grant's steps)."""
    holdings = tuple(
        Holding(grant_of(r), r.holder, r.since, r.user, r.parent, r.note) for r in state.grants
    )
    scope = next((t.parent for t in state.queue if t.ticket == before), None)
    return LedgerView(
        path=path,
        node=None if state.node is None else state.node.get("summary"),
        holdings=holdings,
        waiting=tuple(
            Waiting(
                t.ticket,
                t.holder,
                t.wants,
                t.since,
                t.user,
                t.parent,
                None if t.sees is None else tuple(sorted(t.sees)),
            )
            for t in state.queue
            if before is None or (t.ticket < before and t.parent == scope)
        ),
    )
