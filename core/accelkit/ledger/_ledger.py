"""``Ledger``: one node's grants, shared by every process on it, so no device is handed out twice.

The ledger file (:mod:`accelkit.ledger._file`) is the only state. Each decision, under the file's
lock: drop the grants and waiting tickets of holders that died (a holder is a pid with its start
time, :mod:`~accelkit.ledger._holder`), bring this process's :class:`~accelkit.Allocator` in step
with the recorded grants, and let it decide exactly as it decides in one process (placement rules,
best fit for fractions, all or nothing). A holder killed at any moment therefore leaves no lost
grant (it is reclaimed at the next decision) and no phantom one (a grant is recorded in the same
atomic replace that hands it out).

Waiting requests queue in arrival order: each takes a numbered ticket in the file, and a request
is served only when no live ticket of its scope that could use what it takes is ahead of it
(:mod:`~accelkit.ledger._queue`), so a large request is never starved by a stream of small
ones. A request the node could never serve raises :class:`~accelkit.Unsatisfiable` at once,
waiting or not.

The ledger is the physical node's (:mod:`~accelkit.ledger._identity`): a process that sees only
some devices takes only from those, and a process that runs on a grant (``ACCELKIT_GRANT``)
takes *steps* of that grant, from its devices (:mod:`~accelkit.ledger._scope`), like a job step
inside a SLURM allocation. Steps queue among themselves, never behind requests for the node
(which may wait for the very grant the step is part of). A grant given back, or whose holder
ended, leaves its steps to the grant it was itself a step of, or to the node: the devices they
use stay counted.
"""

from __future__ import annotations

import os
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from contextlib import suppress
from typing import TYPE_CHECKING, Callable, Optional, Union

from accelkit.errors import InvalidRequest, LedgerError
from accelkit.ledger._file import LedgerFile
from accelkit.ledger._holder import Holder
from accelkit.ledger._identity import (
    Restriction,
    allocatable,
    counterpart,
    enclosing_grant,
    fingerprint,
    given_node,
    grant_variable,
    ledger_node,
    mismatch,
)
from accelkit.ledger._in_step import InStep
from accelkit.ledger._location import location_of
from accelkit.ledger._queue import held_back, reserved
from accelkit.ledger._scope import (
    Scope,
    acquire_around,
    acquire_in,
    describe,
    enclosing_record,
    never_fitting,
    step_scope,
    visible_scope,
)
from accelkit.ledger._state import LedgerState, Record, Ticket
from accelkit.ledger._turns import Turns
from accelkit.ledger._upkeep import OtherMachine, drop, lineage, reclaim
from accelkit.schedule._grant import Grant
from accelkit.schedule._request import request_key

if TYPE_CHECKING:
    from pathlib import Path

    from accelkit.device import Device
    from accelkit.host import Host
    from accelkit.ledger._views import Holding, LedgerView, WaitReporter
    from accelkit.node._record import Node
    from accelkit.registry import Registry

__all__ = ["Ledger"]

_FIRST_POLL = 0.002
_LAST_POLL = 0.1
"""A waiter looks again after 2 ms, doubling up to every 100 ms while it waits."""


class Ledger:
    """Grants of one node, recorded in a file that every process on the node shares.

    ``path`` None: the ledger of the grant this process runs on (``$ACCELKIT_GRANT``), else
    ``$ACCELKIT_LEDGER``, else the per-user runtime directory (see
    :func:`accelkit.ledger._file.default_path`); a relative path, or one that names a directory
    (``/srv/ledgers/``), is a :class:`~accelkit.LedgerError`. ``node`` None: detected on first
    use on ``host`` (None: this machine) without this process's restriction (visibility
    variables, the operator's exclusions and overrides, ``overrides``), so every process of the
    machine meets the same node; this process then takes only the devices it sees. ``node``
    given: the node the ledger hands out, as it is, unless detection narrowed it (its
    ``detected`` counts devices it does not list): then the physical node of ``host``, of which
    it takes ``node``'s devices. The ledger keeps a fingerprint of its node and refuses another
    one while grants of the first are live. ``registry`` serves the families whose rules are
    code.
    """

    def __init__(
        self,
        path: Union[str, os.PathLike[str], None] = None,
        node: Optional[Node] = None,
        *,
        registry: Optional[Registry] = None,
        host: Optional[Host] = None,
        overrides: Optional[Mapping[str, object]] = None,
    ) -> None:
        if node is not None and overrides:
            raise ValueError(
                "overrides say how to detect the ledger's node; give them without node, or "
                "give node detected with them"
            )
        self._location, private = location_of(path)
        self._file = LedgerFile(self._location, private_parent=private)
        self._given = node
        self._node: Optional[Node] = None
        self._host = host
        self._overrides = overrides
        self._restriction: Optional[Restriction] = None
        self._enclosing = enclosing_grant(self._location)
        """The grant this process runs on (``ACCELKIT_GRANT``): its requests are steps of it."""
        self._registry = registry
        self._in_step = InStep(self._location, registry)
        self._fingerprint: Optional[dict[str, str]] = None
        self._fixed_scope: Optional[Scope] = None  # refuse_never_fitting's, read once
        self._fitting: set[object] = set()  # and the requests it found could fit
        self._turns = Turns(self._file)

    @property
    def path(self) -> Path:
        """The ledger's file. The ledger keeps it as text and makes this on request, so that
        taking a grant never imports ``pathlib`` (2.5 ms of ``accelkit run`` and ``env``)."""
        from pathlib import Path

        return Path(self._location)

    @property
    def node(self) -> Node:
        """The node this ledger hands out (detected on first use when none was given)."""
        if self._node is None:
            from accelkit.host import LocalHost
            from accelkit.registry import resolve

            plugins = resolve(self._registry)
            if self._given is not None:
                self._node, self._restriction = given_node(self._given, self._host, plugins)
            else:
                host = LocalHost() if self._host is None else self._host
                self._node, self._restriction = ledger_node(host, self._overrides, plugins)
        return self._node

    @property
    def enclosing(self) -> Optional[int]:
        """The token of the grant this process runs on (``ACCELKIT_GRANT``, when it names a grant
        of this ledger), whose steps its requests take; None: they take from the node."""
        return self._enclosing

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
        note: Optional[str] = None,
    ) -> Optional[Grant]:
        """A grant held by this process, or None.

        Without ``wait``, None when the request does not fit now (or requests that wait are
        ahead of it). With ``wait``, queue in arrival order until it fits; None only when
        ``timeout`` seconds pass first, or when ``stop()`` turns true (asked between looks).
        ``on_wait`` is told once, when the request starts to wait, what it waits for. ``note``
        says what holds the grant, for ``accelkit ps`` (default: the holder's command line).
        In a process that runs on a grant, the grant is a step of it. Raises
        :class:`~accelkit.Unsatisfiable` at once for a request this node (or the grant this
        process runs on, or the devices it sees) can never serve,
        :class:`~accelkit.InvalidRequest` for a malformed one, and
        :class:`~accelkit.LedgerError` for a ledger it cannot use.
        """
        if timeout is not None and not wait:
            raise ValueError("timeout applies to waiting: pass wait=True with it")
        holder = Holder.current()
        wants = describe(request, accelerator_type)
        deadline = None if timeout is None else time.monotonic() + timeout
        ticket: Optional[int] = None
        poll = _FIRST_POLL
        try:
            while True:
                grant, ticket, view = self._decide(
                    request, accelerator_type, holder, ticket, wants, wait, note
                )
                if grant is not None or not wait:
                    return grant
                if on_wait is not None and view is not None:
                    on_wait(view)
                    on_wait = None
                left = None if deadline is None else deadline - time.monotonic()
                if (stop is not None and stop()) or (left is not None and left <= 0):
                    if ticket is not None:
                        self._turns.withdraw(ticket)
                    return None
                time.sleep(poll if left is None else min(poll, left))
                poll = min(poll * 2, _LAST_POLL)
        except BaseException:
            if ticket is not None and ticket not in self._turns.abandoned:
                with suppress(LedgerError):  # what failed is raised; the ticket goes later
                    self._turns.withdraw(ticket)
            raise

    def release(self, grant: Grant) -> None:
        """Give ``grant`` back; :class:`~accelkit.InvalidRequest` if the ledger does not hold it
        (released already, or reclaimed after its holder ended)."""
        if not self.discard(grant):
            raise InvalidRequest(
                f"{grant!r} is not held in the ledger {self._location}: it was released already, "
                "or its holder ended and the grant was reclaimed"
            )

    def grants(self) -> list[Grant]:
        """The live grants, steps included (holders that died are reclaimed first)."""
        return [holding.grant for holding in self.view().holdings]

    # -- for accelkit's own faces (run, ps, env, the pool) -----------------------------------
    def refuse_never_fitting(
        self, request: Mapping[str, object], *, accelerator_type: Optional[str] = None
    ) -> None:
        """Raise :class:`~accelkit.Unsatisfiable` now for a request that could never fit where
        this process takes from, the grant it runs on or the devices it sees, as ``acquire``
        would once asked: a pool refuses such a call at ``submit``, not through its future.
        Whether the node itself could ever serve it is the caller's check (it needs no file).
        Neither a grant's devices nor what a process sees change: the ledger is read once, and
        a request that fitted is not asked again (a pool submits the same one many times)."""
        node = self.node  # finding the node finds what this process sees, too
        restricted = self._enclosing is not None or self._restriction is not None
        if restricted and self._fixed_scope is None:
            with self._turns.locked() as state:
                self._fixed_scope = self._scope(state, node)
        key = (request_key(request), accelerator_type)
        if self._fixed_scope is not None and key not in self._fitting:
            wants = describe(request, accelerator_type)
            never_fitting(self._fixed_scope, node, self._registry, request, accelerator_type, wants)
            self._fitting.add(key)

    def env(
        self,
        grant: Grant,
        base_env: Optional[Mapping[str, str]] = None,
        *,
        hide_others: Union[bool, Collection[str]] = False,
        hooks: bool = True,
        peers: Sequence[Grant] = (),
        registry: Optional[Registry] = None,
    ) -> dict[str, Optional[str]]:
        """``grant.env(...)`` with ``ACCELKIT_GRANT`` added: the environment of a process that
        runs on ``grant``, in which accelkit takes steps of it rather than the node's devices.
        ``registry`` None: the ledger's."""
        plugins = self._registry if registry is None else registry
        env = grant.env(
            base_env, hide_others=hide_others, hooks=hooks, registry=plugins, peers=peers
        )
        env.update(grant_variable(grant.token, self._location))
        return env

    def view(self) -> LedgerView:
        """Live grants with their holders, and the requests waiting, after reclaiming. A ledger
        this process may not write is read as it is, and reclaimed only in what is returned."""
        if not self._file.writable():
            state = self._file.peek()
            reclaim(state, self._location, self._uuids)
            return self._view(state)
        with self._turns.locked() as state:
            reclaim(state, self._location, self._uuids)
            return self._view(state)

    def holding(
        self, devices: Iterable[Device]
    ) -> list[tuple[Holding, list[tuple[Device, float]]]]:
        """The live grants that hold any of ``devices`` (as this process's node lists them,
        matched to the ledger's node), other than the grants this process runs on, each with
        the devices of those it holds (and its shares), not the rest of its grant. Reads the
        ledger without changing it; a ledger kept for another node holds none of them."""
        state = self._file.peek()
        try:
            reclaim(state, self._location, self._uuids)
        except OtherMachine:
            return []  # another machine's grants: none of this node's devices
        if not state.grants:
            return []  # nothing to match: no need to detect the node
        node = self.node
        if (
            state.node is None
            or state.node.get("fingerprint") != self._identity(node)["fingerprint"]
        ):
            return []
        from accelkit.registry import resolve

        physical, plugins = allocatable(node), resolve(self._registry)
        keys = set()
        for device in devices:
            match = counterpart(device, physical, plugins)
            if match is not None:
                keys.add((match.family, match.id))
        mine = lineage(state, self._enclosing)
        found = []
        for holding in self._view(state).holdings:
            named = [(d, share) for d, share in holding.grant.devices if (d.family, d.id) in keys]
            if named and holding.grant.token not in mine:
                found.append((holding, named))
        return found

    def discard(self, grant: Grant) -> bool:
        """Give ``grant`` back if the ledger still holds it; whether it did. Its steps, if any
        still run, become steps of the grant it was a step of (or grants of the node)."""
        recorded = self._in_step.recorded(grant)
        with self._turns.locked() as state:
            reclaim(state, self._location, self._uuids)
            for record in state.grants:
                if record.token == grant.token and record.grant == recorded:
                    drop(state, [record])
                    return True
        return False

    def transfer(self, grant: Grant, holder: Holder) -> None:
        """Make ``holder`` the holder of ``grant`` (a pool hands a grant to its worker process,
        so the grant lives exactly as long as the process that uses the devices)."""
        with self._turns.locked() as state:
            for record in state.grants:
                if record.token == grant.token:
                    record.holder = holder
                    state.changed = True
                    return
        raise InvalidRequest(f"{grant!r} is not held in the ledger {self._location}")

    # -- deciding ----------------------------------------------------------------------------
    def _decide(
        self,
        request: Mapping[str, object],
        accelerator_type: Optional[str],
        holder: Holder,
        ticket: Optional[int],
        wants: str,
        wait: bool,
        note: Optional[str],
    ) -> tuple[Optional[Grant], Optional[int], Optional[LedgerView]]:
        """One decision under the lock: (grant, ticket, view when it must wait)."""
        node = self.node
        with self._turns.locked() as state:
            reclaim(state, self._location, self._uuids)
            self._check_node(state, node)
            allocator = self._in_step.allocator(state, node)
            scope = self._scope(state, node)
            parent = None if scope is None else scope.parent
            if scope is None:
                grant = allocator.acquire(request, accelerator_type=accelerator_type)
            else:
                used = self._used(state, parent)
                grant = acquire_in(
                    scope, node, self._registry, used, request, accelerator_type, wants
                )
            ahead = reserved(state.queue, parent, ticket)
            if grant is not None and held_back(grant, ahead):
                if scope is None:
                    allocator.release(grant)  # validated, and it fits, but others came first
                grant = None
                if ahead is not None:  # waiters that see some devices: it may fit beside them
                    used = self._used(state, parent)
                    grant = acquire_around(
                        scope, node, self._registry, used, request, accelerator_type, ahead
                    )
                    if grant is not None and scope is None:
                        allocator.restore([grant])  # the allocator holds what is recorded
            if grant is not None:
                record = Record(
                    grant.to_dict(), holder, time.time(), os.getuid(), parent=parent, note=note
                )
                state.grants.append(record)
                if scope is None:
                    self._in_step.add(record.grant, grant)
                state.queue = [t for t in state.queue if t.ticket != ticket]
                state.changed = True
                return grant, None, None
            if not wait:
                return None, ticket, None
            if ticket is None or all(t.ticket != ticket for t in state.queue):
                ticket = state.next_ticket
                state.next_ticket += 1
                sees = None if scope is None else frozenset(scope.devices)
                waiting = Ticket(ticket, holder, wants, time.time(), os.getuid(), parent, sees)
                state.queue.append(waiting)
                state.changed = True
            return None, ticket, self._view(state, before=ticket)

    def _scope(self, state: LedgerState, node: Node) -> Optional[Scope]:
        """Where this process's requests take from: the grant it runs on, the devices it sees,
        or (None) the whole node."""
        if self._enclosing is not None:
            record = enclosing_record(state, self._enclosing, self._location)
            return step_scope(self._grant(record), node).narrowed(self._restriction)
        if self._restriction is not None:
            return visible_scope(self._restriction, node)
        return None

    def _used(self, state: LedgerState, parent: Optional[int]) -> list[Grant]:
        """The grants of ``parent``'s level (None: the node's), beside which a request takes."""
        return [self._grant(r) for r in state.grants if r.parent == parent]

    def _grant(self, record: Record) -> Grant:
        """The recorded grant; a record that does not read as one makes the ledger corrupt."""
        try:
            return Grant.from_dict(record.grant)
        except ValueError as error:
            raise self._file.corrupt(str(error)) from None

    def _check_node(self, state: LedgerState, node: Node) -> None:
        """Record this node in a new ledger; refuse a ledger whose live grants are another's."""
        recorded = state.node
        if recorded is not None and (state.grants or state.queue):
            if recorded.get("fingerprint") != self._identity(node)["fingerprint"]:
                raise LedgerError(
                    f"the ledger {self._location} holds grants on another node "
                    f"{mismatch(recorded, self._identity(node))}. Give work on this node its "
                    "own ledger (--ledger PATH, path=...), or wait until the other node's grants "
                    "end"
                )
            return
        if recorded != self._identity(node):
            state.node = self._identity(node)
            state.changed = True

    def _uuids(self) -> list[str]:
        """This machine's device UUIDs (what tells its grants from another machine's)."""
        return [d.uuid for d in self.node.devices if d.uuid]

    def _identity(self, node: Node) -> dict[str, str]:
        """The node's fingerprint, computed once."""
        if self._fingerprint is None:
            self._fingerprint = fingerprint(node)
        return self._fingerprint

    def _view(self, state: LedgerState, before: Optional[int] = None) -> LedgerView:
        from accelkit.ledger._views import view_of

        return view_of(state, self.path, self._grant, before)

    def __repr__(self) -> str:
        return f"<Ledger {self._location}>"
