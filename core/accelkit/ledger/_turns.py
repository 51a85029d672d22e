"""How one :class:`~accelkit.ledger.Ledger` object takes its turn at the ledger's file: its
threads one at a time, then the processes of the node (the file's lock), and the waiting tickets
it gave up on taken out of the queue first.

A waiter that stops waiting (timed out, stopped, interrupted) takes its ticket out of the queue.
When the ledger fails just then (a full disk, its lock held by a stopped process), often the
very failure that ended the wait, the ticket would stay for as long as its process lives on,
and hold back every request of the node behind it: a service whose wait failed goes on with
other work, and may never look at the ledger again. Such a ticket is remembered, taken out at
the object's next look at the ledger, and meanwhile by a thread that tries again every few
seconds until the ledger takes the change. (Once the process ends, the ledger reclaims its
tickets with it.)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING

from accelkit.errors import LedgerError
from accelkit.ledger._forks import renew_after_fork
from accelkit.ledger._holder import Holder

if TYPE_CHECKING:
    from accelkit.ledger._file import LedgerFile
    from accelkit.ledger._state import LedgerState

__all__ = ["Turns"]

_FIRST_RETRY = 1.0
_LAST_RETRY = 30.0
"""A ticket given up on while the ledger failed is withdrawn again after 1 s, doubling up to
every 30 s (the ledger's lock patience) for as long as the ledger fails."""


class Turns:
    """The turns of one ledger object at ``file``, and the tickets it gave up on."""

    def __init__(self, file: LedgerFile) -> None:
        self._file = file
        self._threads = threading.Lock()
        self._abandoned: set[int] = set()
        """Tickets given up on while the ledger failed, still to take out of the queue."""
        self._retrying = False  # whether a thread tries again to take them out
        self._retry_lock = threading.Lock()
        renew_after_fork(self)

    def after_fork(self) -> None:
        """In a forked child: locks of its own (a thread of the parent may have held them) and
        no thread that tries again (it stayed in the parent)."""
        self._threads = threading.Lock()
        self._retry_lock = threading.Lock()
        self._retrying = False

    @property
    def abandoned(self) -> frozenset[int]:
        """The tickets given up on that are still in the queue, as far as this object knows."""
        return frozenset(self._abandoned)

    @contextmanager
    def locked(self) -> Iterator[LedgerState]:
        """The ledger's state under both locks, first rid of the tickets given up on; saved on
        exit if ``changed`` is set (as :meth:`LedgerFile.locked`)."""
        with self._threads:
            abandoned = set(self._abandoned)
            with self._file.locked() as state:
                mine = Holder.current()  # a ledger made anew may give the numbers again
                kept = [t for t in state.queue if t.ticket not in abandoned or t.holder != mine]
                if len(kept) != len(state.queue):
                    state.queue = kept
                    state.changed = True
                yield state
            self._abandoned -= abandoned  # saved: they are out of the queue

    def withdraw(self, ticket: int) -> None:
        """Take ``ticket`` out of the queue; when the ledger fails, raise its error, and have
        the ticket taken out once it works again."""
        self._abandoned.add(ticket)
        try:
            with self.locked():
                pass
        except LedgerError:
            with self._retry_lock:
                if not self._retrying:
                    self._retrying = True
                    retry = threading.Thread(
                        target=self._retry, name="accelkit-ledger-withdraw", daemon=True
                    )
                    retry.start()
            raise

    def _retry(self) -> None:
        """Try again, less and less often, until no ticket given up on is left in the queue."""
        pause = _FIRST_RETRY
        while True:
            time.sleep(pause)
            with suppress(LedgerError), self.locked():
                pass
            with self._retry_lock:
                if not self._abandoned:
                    self._retrying = False
                    return
            pause = min(pause * 2, _LAST_RETRY)
