"""This process's allocator of the ledger's node, kept holding exactly the grants the ledger
records at the node's level, so that each decision is the allocator's own, as in one process.

The allocator is kept between decisions: each brings it in step by releasing the grants the
ledger no longer records and restoring those it has not seen yet, rather than restoring every
grant of the node again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from accelkit.errors import LedgerError
from accelkit.ledger._forks import renew_after_fork
from accelkit.quantities import UNIT, from_units, json_amount
from accelkit.schedule._allocator import Allocator
from accelkit.schedule._grant import Grant

if TYPE_CHECKING:
    from accelkit.ledger._state import LedgerState
    from accelkit.node._record import Node
    from accelkit.registry import Registry

__all__ = ["InStep"]


class InStep:
    """The allocator of one :class:`~accelkit.ledger.Ledger` object (whose file is at
    ``location``), with the grants restored into it."""

    def __init__(self, location: str, registry: Optional[Registry]) -> None:
        self._location = location
        self._registry = registry
        self._allocator: Optional[Allocator] = None
        self._mirror: dict[int, tuple[dict[str, Any], Grant]] = {}
        """Token -> (recorded dict, grant) of every grant restored into ``_allocator``."""
        self._short = False  # whether a grant is counted short of what it records
        renew_after_fork(self)

    def after_fork(self) -> None:
        """In a forked child: an allocator made again at the next decision (a thread of the
        parent may have been bringing this one in step)."""
        self._allocator = None

    def allocator(self, state: LedgerState, node: Node) -> Allocator:
        """The allocator of ``node``, holding exactly the grants ``state`` records at the node's
        level; a :class:`~accelkit.LedgerError` when they do not fit on ``node``."""
        recorded = {r.token: r.grant for r in state.grants if r.parent is None}
        if self._short and any(recorded.get(t) != data for t, (data, _g) in self._mirror.items()):
            self._allocator = None  # counted short: count again what the others hold
        if self._allocator is None:
            self._allocator = Allocator(node, registry=self._registry)
            self._mirror, self._short = {}, False
        allocator = self._allocator
        for token, (data, grant) in list(self._mirror.items()):
            if recorded.get(token) != data:
                allocator.release(grant)
                del self._mirror[token]
        new = [(token, data) for token, data in recorded.items() if token not in self._mirror]
        if new:
            try:
                grants = self._counted(allocator, node, [data for _token, data in new])
                allocator.restore(grants)
            except ValueError as error:
                self._allocator = None
                raise LedgerError(
                    f"the ledger {self._location} records grants this node cannot hold ({error}); "
                    f"if no accelkit work runs on this node, remove it: rm {self._location}"
                ) from None
            for (token, data), grant in zip(new, grants):
                self._mirror[token] = (data, grant)
        return allocator

    def add(self, recorded: dict[str, Any], grant: Grant) -> None:
        """``grant``, which the allocator has just given, is recorded as ``recorded``."""
        self._mirror[grant.token] = (recorded, grant)

    def recorded(self, grant: Grant) -> dict[str, Any]:
        """How the ledger records ``grant`` (as restored here, or as it says itself)."""
        mirrored = self._mirror.get(grant.token)
        return mirrored[0] if mirrored and mirrored[1] == grant else grant.to_dict()

    def _counted(
        self, allocator: Allocator, node: Node, recorded: list[dict[str, Any]]
    ) -> list[Grant]:
        """The ``recorded`` grants as this process counts them beside what ``allocator`` holds.

        Plain capacity (``scratch_disk``) is the operator's to give per user: an override gives
        one user's processes 2, another's 1, and each counts it among its own. Here, capacity
        this process's node lacks is left out, and grants holding more than its node has free
        count as holding the rest of it: all of it is used, rather than the ledger refused as
        one this node cannot hold (every request of this user's, for a GPU too, failed, saying
        to remove a ledger whose grants are live). The grants' devices are everyone's."""
        counted = {*node.resources, *(d.resource_name for d in node.devices)}
        plain = set(node.resources) - {d.resource_name for d in node.devices}
        free = {name: round(amount * UNIT) for name, amount in allocator.available().items()}
        grants = []
        for data in recorded:
            resources = data.get("resources")
            if isinstance(resources, dict):  # else malformed: Grant.from_dict says so
                kept = {}
                for name, amount in resources.items():
                    if name in plain:
                        what = f"{name} of grant {data.get('token')}"
                        held = round(json_amount(amount, what) * UNIT)
                        units = min(held, free[name])
                        self._short = self._short or units < held
                        free[name] -= units
                        amount = from_units(units)
                    if name in counted:
                        kept[name] = amount
                data = {**data, "resources": kept}
            grants.append(Grant.from_dict(data))
        return grants
