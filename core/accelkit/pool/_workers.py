"""A pool's workers as its grants see them: handed a grant when they start, and giving it back
when they stop.

The pool takes each grant in its own process, starts a worker process with the grant's
environment, then makes the worker the grant's holder in the ledger, so the grant lives exactly
as long as the process that may hold device memory. A worker is stopped before its grant is
given back: only then are its devices free.

The ledger may fail on the way (its lock held by a stopped process, a full disk). A grant its
worker held is reclaimed by the ledger itself once usable again, since its holder has ended. A
grant the ledger failed to hand over is still held by the pool's own process, which lives on:
the pool keeps it, and offers it back again until the ledger takes it (before each call, every
few seconds meanwhile, and at shutdown); otherwise its devices would be lost to the node for as
long as the pool's process runs.
"""

from __future__ import annotations

import threading
import warnings
from typing import TYPE_CHECKING, Any, Optional

from accelkit.ledger._holder import Holder
from accelkit.pool._process import WorkerProcess

if TYPE_CHECKING:
    from accelkit.ledger._ledger import Ledger
    from accelkit.registry import Registry
    from accelkit.schedule._grant import Grant

__all__ = ["Handover", "warn_not_stopped"]

_RETRY_SECONDS = 2.0
"""How often the dispatcher offers a kept grant back while it has nothing else to do."""


class Handover:
    """Starts workers on the grants a pool took from ``ledger``, and stops them."""

    def __init__(self, ledger: Ledger, registry: Optional[Registry]) -> None:
        self._ledger = ledger
        self._registry = registry
        self._kept: list[Grant] = []
        """Grants this process holds still: the ledger failed to hand them over, then to take
        them back."""
        self._kept_lock = threading.Lock()

    @property
    def retry_in(self) -> Optional[float]:
        """Seconds after which to offer the kept grants back again (None: none is kept)."""
        return _RETRY_SECONDS if self._kept else None

    def start(self, grant: Grant, key: Any) -> WorkerProcess:
        """A new worker holding ``grant`` (this process's until then), for calls of ``key``.
        Should the worker fail to start, or to become the grant's holder, it is stopped (it
        must not live on, holding the grant), the grant given back, and the failure raised."""
        try:
            env = self._ledger.env(grant, hide_others=True, registry=self._registry)
            worker = WorkerProcess(grant, env, key)
        except BaseException:
            self._give_back(grant, handed_over=False)
            raise
        try:
            holder = Holder.of(worker.pid)
            if holder is not None:
                self._ledger.transfer(grant, holder)
                worker.handed_over = True
        except BaseException:
            self.retire(worker)
            raise
        return worker

    def retire(self, worker: WorkerProcess) -> None:
        """Stop a worker, then give its grant back (only then are its devices free).

        A ledger that cannot take the grant back (unreadable, on a full disk) is reported as a
        warning, not raised: what retires workers (a call that has its result, the dispatcher
        that serves the other calls) must go on."""
        worker.stop()
        self._give_back(worker.grant, handed_over=worker.handed_over)

    def give_back_kept(self, *, last: bool = False) -> None:
        """Offer the kept grants back, as far as the ledger takes them now; ``last``: the pool
        shuts down, and says which grants stay held until its process ends."""
        with self._kept_lock:
            kept = list(self._kept)
        for grant in kept:
            try:
                self._ledger.discard(grant)
            except Exception as error:
                if last:
                    warnings.warn(
                        f"the pool could not give grant {grant!r} back to the ledger "
                        f"{self._ledger.path}: {error}; this process holds it until it ends",
                        RuntimeWarning,
                        stacklevel=1,
                    )
                    continue
                return  # the ledger fails still: the others wait for the next offer too
            with self._kept_lock:
                self._kept.remove(grant)

    def _give_back(self, grant: Grant, *, handed_over: bool) -> None:
        """Give ``grant`` back; keep it when the ledger fails and no worker held it, and warn."""
        try:
            self._ledger.discard(grant)
        except Exception as error:
            if handed_over:
                why = "its worker process has ended, so the ledger reclaims it at its next look"
            else:
                with self._kept_lock:
                    self._kept.append(grant)
                why = "the pool's own process holds it: the pool gives it back once it can"
            warnings.warn(
                f"the pool could not give grant {grant!r} back to the ledger "
                f"{self._ledger.path}: {error} ({why})",
                RuntimeWarning,
                stacklevel=1,
            )


def warn_not_stopped(worker: WorkerProcess, error: BaseException) -> None:
    """Say that ``worker`` could not be stopped, and what that keeps."""
    warnings.warn(
        f"the pool could not stop its worker process (pid {worker.pid}): {error}; its grant "
        f"{worker.grant!r} stays held until that process ends",
        RuntimeWarning,
        stacklevel=2,
    )
