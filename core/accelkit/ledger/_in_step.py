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
        renew_after_fork(self)

    def after_fork(self) -> None:
        """In a forked child: an allocator made again at the next decision (a thread of the
        parent may have been bringing this one in step)."""
        self._allocator = None

    def allocator(self, state: LedgerState, node: Node) -> Allocator:
        """The allocator of ``node``, holding exactly the grants ``state`` records at the node's
        level; a :class:`~accelkit.LedgerError` when they do not fit on ``node``."""
        if self._allocator is None:
            self._allocator = Allocator(node, registry=self._registry)
            self._mirror = {}
        allocator = self._allocator
        recorded = {r.token: r.grant for r in state.grants if r.parent is None}
        for token, (data, grant) in list(self._mirror.items()):
            if recorded.get(token) != data:
                allocator.release(grant)
                del self._mirror[token]
        new = [(token, data) for token, data in recorded.items() if token not in self._mirror]
        if new:
            try:
                grants = [Grant.from_dict(_counted_on(node, data)) for _token, data in new]
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


def _counted_on(node: Node, data: dict[str, Any]) -> dict[str, Any]:
    """A recorded grant as this process counts it: less plain capacity its node lacks, which
    an operator's override gave the holder (``scratch_disk=2`` for one user) and which the
    processes so configured count among themselves; the grant's devices are everyone's."""
    resources = data.get("resources")
    if not isinstance(resources, dict):
        return data  # malformed: Grant.from_dict says so
    known = {*node.resources, *(d.resource_name for d in node.devices)}
    kept = {name: amount for name, amount in resources.items() if name in known}
    return data if len(kept) == len(resources) else {**data, "resources": kept}
