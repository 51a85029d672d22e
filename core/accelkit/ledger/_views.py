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
    from accelkit.schedule._grant import Grant

__all__ = ["Holding", "LedgerView", "WaitReporter", "Waiting"]


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
    grant it waits to take a step of (None: the node)."""

    ticket: int
    holder: Holder
    wants: str
    since: float
    user: Optional[int] = None
    parent: Optional[int] = None


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
