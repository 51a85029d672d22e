"""Pools at the interpreter's exit and across ``fork``: every submitted call runs to its end.

The interpreter waits for the calls of every pool that has started a dispatcher before it exits,
as it waits for the pending futures of ``concurrent.futures`` executors (``shutdown(wait=False)``
included): work that was submitted is done, not dropped, and the workers give their grants back.
A forked child starts with no pools.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any, Callable, Protocol

__all__ = ["register", "start_thread"]


class _Pool(Protocol):
    """What the exit needs of a pool: ``AcceleratorPool.shutdown``."""

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None: ...


_pools: weakref.WeakSet[_Pool] = weakref.WeakSet()
"""The pools that have started a dispatcher (and are not collected): the interpreter waits for
their calls before it exits."""
_exiting = False
"""Whether the interpreter is exiting: pools then start no more calls."""
_exit_lock = threading.Lock()


def register(pool: _Pool) -> None:
    """Have the interpreter wait for ``pool``'s calls at exit; ``RuntimeError`` once the exit
    has begun, as ``concurrent.futures`` refuses a new executor's first call then."""
    with _exit_lock:
        if _exiting:
            raise RuntimeError("cannot schedule new calls after interpreter shutdown")
        _pools.add(pool)


def _wait_at_exit() -> None:
    """Shut every pool down and wait for its calls. ``threading`` calls this at exit before it
    joins its threads and before ``atexit`` handlers run, while worker processes can still be
    started.

    Every pool is told to shut down before any is waited for: each then stops its idle workers
    once its own calls are done, and an idle worker's grant may be what another pool's call
    waits for (waiting for that pool first would wait forever). Not handled: a call waiting
    for devices that this process holds itself (a grant taken from the ledger directly) waits
    forever, since that grant goes back only once the process has ended."""
    global _exiting
    with _exit_lock:
        _exiting = True
        pools = list(_pools)
    for pool in pools:
        pool.shutdown(wait=False)
    for pool in pools:
        pool.shutdown(wait=True)


def _forget_pools_after_fork() -> None:
    """In a forked child, start with no pools and a fresh lock: the parent's pools have no
    dispatcher here, and their locks (or ``_exit_lock``) may have been held by a parent thread
    at the fork, so waiting for them at the child's exit would hang it (as
    ``concurrent.futures.thread`` resets its own)."""
    global _pools, _exiting, _exit_lock
    _pools = weakref.WeakSet()
    _exiting = False
    _exit_lock = threading.Lock()


if hasattr(os, "register_at_fork"):  # not on Windows, which has no fork
    os.register_at_fork(after_in_child=_forget_pools_after_fork)

# The hook concurrent.futures uses (private, in every supported Python): it runs at exit before
# threading joins the program's own threads and before atexit handlers tear libraries down.
threading._register_atexit(_wait_at_exit)  # type: ignore[attr-defined]


def start_thread(target: Callable[..., None], *args: Any) -> bool:
    """Run ``target(*args)`` in a new daemon thread; False when the interpreter is exiting and
    Python starts no more threads (3.12 refuses them from the exit hooks on), in which case the
    caller runs it itself: the calls still waiting at exit then run one at a time.

    ``threading._SHUTTING_DOWN`` says the exit began even before this module's hook has run
    (another hook, such as a ``ThreadPoolExecutor``'s, registered later, runs first and may
    wait long): without it, every call started meanwhile would fail."""
    try:
        threading.Thread(target=target, args=args, daemon=True).start()
    except RuntimeError:
        if _exiting or getattr(threading, "_SHUTTING_DOWN", False):
            return False
        raise
    return True
