"""``Ledger``: one node's grants, shared by every process on it, so no device is handed out twice.

The ledger file (:mod:`accelkit.ledger._file`) is the only state. Each decision, under the file's
lock: drop the grants and waiting tickets of holders that died (a holder is a pid with its start
time, :mod:`~accelkit.ledger._holder`), bring this process's :class:`~accelkit.Allocator` in step
with the recorded grants, and let it decide exactly as it decides in one process (placement rules,
best fit for fractions, all or nothing). A holder killed at any moment therefore leaves no lost
grant (it is reclaimed at the next decision) and no phantom one (a grant is recorded in the same
atomic replace that hands it out).

Waiting requests queue in arrival order: each takes a numbered ticket in the file, and a request
is served only when no live ticket is ahead of it, so a large request is never starved by a
stream of small ones. A request the node could never serve raises
:class:`~accelkit.Unsatisfiable` at once, waiting or not.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from accelkit.errors import InvalidRequest, LedgerError
from accelkit.ledger._file import LedgerFile, LedgerState, Record, Ticket, default_path
from accelkit.ledger._holder import Holder, boot_id
from accelkit.schedule._allocator import Allocator
from accelkit.schedule._grant import Grant

if TYPE_CHECKING:
    import os

    from accelkit.node._record import Node
    from accelkit.registry import Registry

__all__ = ["Holding", "Ledger", "LedgerView", "Waiting"]

_FIRST_POLL = 0.002
_LAST_POLL = 0.1
"""A waiter looks again after 2 ms, doubling up to every 100 ms while it waits."""


@dataclass(frozen=True)
class Holding:
    """A live grant and the process holding it, since ``since`` (epoch seconds)."""

    grant: Grant
    holder: Holder
    since: float


@dataclass(frozen=True)
class Waiting:
    """A request waiting its turn: ``ticket`` is its place in arrival order."""

    ticket: int
    holder: Holder
    wants: str
    since: float


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


class Ledger:
    """Grants of one node, recorded in a file that every process on the node shares.

    ``path`` None: ``$ACCELKIT_LEDGER``, else the per-user runtime directory (see
    :func:`accelkit.ledger._file.default_path`). ``node`` None: detected on first use
    (``detect_node()``); the ledger keeps a fingerprint of its node and refuses another one
    while grants of the first are live. ``registry`` serves the families whose rules are code.
    """

    def __init__(
        self,
        path: Union[str, os.PathLike[str], None] = None,
        node: Optional[Node] = None,
        *,
        registry: Optional[Registry] = None,
    ) -> None:
        self.path, private = (Path(path), False) if path is not None else default_path()
        self._file = LedgerFile(self.path, private_parent=private)
        self._node = node
        self._registry = registry
        self._allocator: Optional[Allocator] = None
        self._mirror: dict[int, tuple[dict[str, Any], Grant]] = {}
        """Token -> (recorded dict, grant) of every grant restored into ``_allocator``."""
        self._fingerprint: Optional[dict[str, str]] = None
        self._threads = threading.Lock()

    @property
    def node(self) -> Node:
        """The node this ledger hands out (detected on first use when none was given)."""
        if self._node is None:
            from accelkit.node._detect import detect_node

            self._node = detect_node(registry=self._registry)
        return self._node

    # -- the public verbs --------------------------------------------------------------------
    def acquire(
        self,
        request: Mapping[str, object],
        wait: bool = False,
        timeout: Optional[float] = None,
        *,
        accelerator_type: Optional[str] = None,
        on_wait: Optional[WaitReporter] = None,
        stop: Optional[Callable[[], bool]] = None,
    ) -> Optional[Grant]:
        """A grant held by this process, or None.

        Without ``wait``, None when the request does not fit now (or requests that wait are
        ahead of it). With ``wait``, queue in arrival order until it fits; None only when
        ``timeout`` seconds pass first, or when ``stop()`` turns true (asked between looks).
        ``on_wait`` is told once, when the request starts to wait, what it waits for. Raises
        :class:`~accelkit.Unsatisfiable` at once for a request this node can never serve,
        :class:`~accelkit.InvalidRequest` for a malformed one, and
        :class:`~accelkit.LedgerError` for a ledger it cannot use.
        """
        if timeout is not None and not wait:
            raise ValueError("timeout applies to waiting: pass wait=True with it")
        holder = Holder.current()
        wants = _describe(request, accelerator_type)
        deadline = None if timeout is None else time.monotonic() + timeout
        ticket: Optional[int] = None
        poll = _FIRST_POLL
        try:
            while True:
                grant, ticket, view = self._decide(
                    request, accelerator_type, holder, ticket, wants if wait else None
                )
                if grant is not None or not wait:
                    return grant
                if on_wait is not None and view is not None:
                    on_wait(view)
                    on_wait = None
                left = None if deadline is None else deadline - time.monotonic()
                if (stop is not None and stop()) or (left is not None and left <= 0):
                    self._withdraw(ticket)
                    return None
                time.sleep(poll if left is None else min(poll, left))
                poll = min(poll * 2, _LAST_POLL)
        except BaseException:
            if ticket is not None:
                self._withdraw(ticket)
            raise

    def release(self, grant: Grant) -> None:
        """Give ``grant`` back; :class:`~accelkit.InvalidRequest` if the ledger does not hold it
        (released already, or reclaimed after its holder ended)."""
        if not self.discard(grant):
            raise InvalidRequest(
                f"{grant!r} is not held in the ledger {self.path}: it was released already, or "
                "its holder ended and the grant was reclaimed"
            )

    def grants(self) -> list[Grant]:
        """The live grants (holders that died are reclaimed first)."""
        return [holding.grant for holding in self.view().holdings]

    # -- for accelkit's own faces (run, ps, the pool) ----------------------------------------
    def view(self) -> LedgerView:
        """Live grants with their holders, and the requests waiting, after reclaiming."""
        with self._threads, self._file.locked() as state:
            _reclaim(state)
            return self._view(state)

    def discard(self, grant: Grant) -> bool:
        """Give ``grant`` back if the ledger still holds it; whether it did."""
        mirrored = self._mirror.get(grant.token)
        recorded = mirrored[0] if mirrored and mirrored[1] == grant else grant.to_dict()
        with self._threads, self._file.locked() as state:
            _reclaim(state)
            for record in state.grants:
                if record.token == grant.token and record.grant == recorded:
                    state.grants.remove(record)
                    state.changed = True
                    return True
        return False

    def transfer(self, grant: Grant, holder: Holder) -> None:
        """Make ``holder`` the holder of ``grant`` (a pool hands a grant to its worker process,
        so the grant lives exactly as long as the process that uses the devices)."""
        with self._threads, self._file.locked() as state:
            for record in state.grants:
                if record.token == grant.token:
                    record.holder = holder
                    state.changed = True
                    return
        raise InvalidRequest(f"{grant!r} is not held in the ledger {self.path}")

    # -- deciding ----------------------------------------------------------------------------
    def _decide(
        self,
        request: Mapping[str, object],
        accelerator_type: Optional[str],
        holder: Holder,
        ticket: Optional[int],
        queue_as: Optional[str],
    ) -> tuple[Optional[Grant], Optional[int], Optional[LedgerView]]:
        """One decision under the lock: (grant, ticket, view when it must wait)."""
        node = self.node
        with self._threads, self._file.locked() as state:
            _reclaim(state)
            self._check_node(state, node)
            allocator = self._in_step(state)
            grant = allocator.acquire(request, accelerator_type=accelerator_type)
            ahead = any(ticket is None or t.ticket < ticket for t in state.queue)
            if grant is not None and ahead:
                allocator.release(grant)  # validated, and it fits, but others came first
                grant = None
            if grant is not None:
                record = Record(grant.to_dict(), holder, time.time())
                state.grants.append(record)
                self._mirror[grant.token] = (record.grant, grant)
                state.queue = [t for t in state.queue if t.ticket != ticket]
                state.changed = True
                return grant, None, None
            if queue_as is None:
                return None, ticket, None
            if ticket is None or all(t.ticket != ticket for t in state.queue):
                ticket = state.next_ticket
                state.next_ticket += 1
                state.queue.append(Ticket(ticket, holder, queue_as, time.time()))
                state.changed = True
            return None, ticket, self._view(state, before=ticket)

    def _withdraw(self, ticket: Optional[int]) -> None:
        """Leave the queue (timed out, stopped, or interrupted)."""
        if ticket is None:
            return
        with self._threads, self._file.locked() as state:
            kept = [t for t in state.queue if t.ticket != ticket]
            if len(kept) != len(state.queue):
                state.queue = kept
                state.changed = True

    def _check_node(self, state: LedgerState, node: Node) -> None:
        """Record this node in a new ledger; refuse a ledger whose live grants are another's."""
        if self._fingerprint is None:
            self._fingerprint = fingerprint(node)
        if state.node == self._fingerprint:
            return
        if state.node is not None and (state.grants or state.queue):
            raise LedgerError(
                f"the ledger {self.path} holds grants on another node "
                f"({state.node.get('summary')}), not this one ({self._fingerprint['summary']}). "
                "Give work on this node its own ledger (--ledger PATH, path=...), or wait until "
                "the other node's grants end"
            )
        state.node = self._fingerprint
        state.changed = True

    def _in_step(self, state: LedgerState) -> Allocator:
        """This process's allocator, holding exactly the grants the ledger records."""
        if self._allocator is None:
            self._allocator = Allocator(self.node, registry=self._registry)
            self._mirror = {}
        allocator = self._allocator
        recorded = {record.token: record.grant for record in state.grants}
        for token, (data, grant) in list(self._mirror.items()):
            if recorded.get(token) != data:
                allocator.release(grant)
                del self._mirror[token]
        new = [(token, data) for token, data in recorded.items() if token not in self._mirror]
        if new:
            try:
                grants = [Grant.from_dict(data) for _token, data in new]
                allocator.restore(grants)
            except ValueError as error:
                self._allocator = None
                raise LedgerError(
                    f"the ledger {self.path} records grants this node cannot hold ({error}); "
                    f"if no accelkit work runs on this node, remove it: rm {self.path}"
                ) from None
            for (token, data), grant in zip(new, grants):
                self._mirror[token] = (data, grant)
        return allocator

    def _view(self, state: LedgerState, before: Optional[int] = None) -> LedgerView:
        """The state as a view; ``before``: only the tickets ahead of that one."""
        try:
            holdings = tuple(
                Holding(Grant.from_dict(r.grant), r.holder, r.since) for r in state.grants
            )
        except ValueError as error:
            raise self._file.corrupt(str(error)) from None
        return LedgerView(
            path=self.path,
            node=None if state.node is None else state.node.get("summary"),
            holdings=holdings,
            waiting=tuple(
                Waiting(t.ticket, t.holder, t.wants, t.since)
                for t in state.queue
                if before is None or t.ticket < before
            ),
        )

    def __repr__(self) -> str:
        return f"<Ledger {self.path}>"


def fingerprint(node: Node) -> dict[str, str]:
    """What identifies a node to its ledger: a hash of what allocation depends on (devices,
    resources, family policies), and a readable summary for messages."""
    facts = {
        "devices": [
            [d.family, d.id, d.resource_name, d.index, d.type_label, d.parent] for d in node.devices
        ],
        "resources": sorted(node.resources.items()),
        "families": {name: p.to_dict() for name, p in sorted(node.policies.items())},
    }
    digest = hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()
    summary = ", ".join(f"{name}={amount:g}" for name, amount in sorted(node.resources.items()))
    return {"fingerprint": digest[:32], "summary": summary or "no resources"}


def _reclaim(state: LedgerState) -> None:
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
    state.grants = [r for r in state.grants if alive[r.holder]]
    state.queue = [t for t in state.queue if alive[t.holder]]
    state.changed = True


def _describe(request: Mapping[str, object], accelerator_type: Optional[str]) -> str:
    """``GPU=1, accelerator_type=H100``: a request as people write it on the command line."""
    try:
        parts = [
            f"{name}={quantity:g}" if isinstance(quantity, float) else f"{name}={quantity}"
            for name, quantity in request.items()
        ]
    except AttributeError:
        return repr(request)
    if accelerator_type is not None:
        parts.append(f"accelerator_type={accelerator_type}")
    return ", ".join(parts) or "nothing"
