"""Who a waiting request lets pass: the rule that keeps the queue fair without letting one waiter
stall a node.

Requests wait in arrival order, each queue apart (the node's, and each grant's steps), so a large
request is never starved by a stream of small ones. A waiter ahead holds a grant back only when
it could ever use what the grant takes:

- a waiter that sees some devices only (a shell with ``CUDA_VISIBLE_DEVICES=0``) waits for
  those: a grant of other devices takes nothing it could have, and goes ahead of it (otherwise
  one user's restricted shell would stall every request on the node for as long as its device
  is busy). A request whose best fit is one of those devices is placed again around them: it
  takes other devices where they fit, rather than wait for a waiter that could use none of them
  (a waiter ahead that sees every device holds back every grant: first come, first served);
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
    from accelkit.ledger._identity import DeviceKey
    from accelkit.ledger._state import Ticket
    from accelkit.schedule._grant import Grant

__all__ = ["held_back", "reserved"]


def reserved(
    queue: Iterable[Ticket], parent: Optional[int], ticket: Optional[int]
) -> Optional[frozenset[DeviceKey]]:
    """The devices that the waiters ahead of ``ticket`` (None: a request that does not wait,
    behind every one) in the queue of ``parent`` (None: the node's) could ever use, which a
    grant must leave to them. None: every device, and anything else a grant takes (a waiter
    ahead sees every device: first come, first served)."""
    devices: set[DeviceKey] = set()
    for waiter in queue:
        if waiter.parent != parent or (ticket is not None and waiter.ticket >= ticket):
            continue
        if waiter.holder.stopped():
            continue
        if waiter.sees is None:
            return None
        devices |= waiter.sees
    return frozenset(devices)


def held_back(grant: Grant, ahead: Optional[frozenset[DeviceKey]]) -> bool:
    """Whether ``grant`` takes something the waiters ahead could use (``ahead``:
    :func:`reserved`)."""
    if ahead is None:
        return True
    return any((device.family, device.id) in ahead for device, _share in grant.devices)
