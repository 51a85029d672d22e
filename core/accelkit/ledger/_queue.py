"""Who a waiting request lets pass: the rule that keeps the queue fair without letting one waiter
stall a node.

Requests wait in arrival order, each queue apart (the node's, and each grant's steps), so a large
request is never starved by a stream of small ones. A waiter ahead holds a grant back only when
it could ever use what the grant takes:

- a waiter that sees some devices only (a shell with ``CUDA_VISIBLE_DEVICES=0``) waits for
  those: a grant of other devices takes nothing it could have, and goes ahead of it (otherwise
  one user's restricted shell would stall every request on the node for as long as its device
  is busy);
- a stopped waiter (Ctrl-Z, SIGSTOP) takes nothing while it is stopped: it keeps its place, and
  holds nobody back until it runs again.

A waiter holds its place for as long as its process lives, however long ago it last looked: the
ledger does not record looks (that would write the file at every look of every waiter), and a
waiter that truly waits may go long without one (a loaded machine, a frozen cgroup, a slow file
system); passing it would break first-come order. A process that stops waiting takes its ticket
out itself, even when the ledger fails as it does (:mod:`~accelkit.ledger._turns`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from accelkit.ledger._state import Ticket
    from accelkit.schedule._grant import Grant

__all__ = ["held_back"]


def held_back(
    grant: Grant, queue: Iterable[Ticket], parent: Optional[int], ticket: Optional[int]
) -> bool:
    """Whether a waiter ahead of ``ticket`` (None: a request that does not wait, behind every
    one) in the queue of ``parent`` (None: the node's) holds ``grant`` back."""
    return any(
        waiter.parent == parent
        and (ticket is None or waiter.ticket < ticket)
        and _could_use(waiter, grant)
        and not waiter.holder.stopped()
        for waiter in queue
    )


def _could_use(waiter: Ticket, grant: Grant) -> bool:
    """Whether the waiter could ever take something ``grant`` takes."""
    if waiter.sees is None:
        return True
    return any((device.family, device.id) in waiter.sees for device, _share in grant.devices)
