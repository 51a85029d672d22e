"""A pool's workers as its grants see them: handed a grant when they start, and giving it back
when they stop.

The pool takes each grant in its own process, starts a worker process with the grant's
environment, then makes the worker the grant's holder in the ledger, so the grant lives exactly
as long as the process that may hold device memory. A worker is stopped before its grant is
given back: only then are its devices free.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any, Optional

from accelkit.ledger._holder import Holder
from accelkit.pool._process import WorkerProcess

if TYPE_CHECKING:
    from accelkit.ledger._ledger import Ledger
    from accelkit.registry import Registry
    from accelkit.schedule._grant import Grant

__all__ = ["Handover", "warn_not_stopped"]


class Handover:
    """Starts workers on the grants a pool took from ``ledger``, and stops them."""

    def __init__(self, ledger: Ledger, registry: Optional[Registry]) -> None:
        self._ledger = ledger
        self._registry = registry

    def start(self, grant: Grant, key: Any) -> WorkerProcess:
        """A new worker holding ``grant`` (this process's until then), for calls of ``key``.
        Should the worker fail to start, or to become the grant's holder, it is stopped (it
        must not live on, holding the grant), the grant given back, and the failure raised."""
        try:
            env = self._ledger.env(grant, hide_others=True, registry=self._registry)
            worker = WorkerProcess(grant, env, key)
        except BaseException:
            self._ledger.discard(grant)
            raise
        try:
            holder = Holder.of(worker.pid)
            if holder is not None:
                self._ledger.transfer(grant, holder)
        except BaseException:
            self.retire(worker)
            raise
        return worker

    def retire(self, worker: WorkerProcess) -> None:
        """Stop a worker, then give its grant back (only then are its devices free).

        A ledger that cannot take the grant back (unreadable, on a full disk) is reported as a
        warning, not raised: the worker has ended, so the ledger drops its grant by itself at
        its next look once it is usable again, and what retires workers (a call that has its
        result, the dispatcher that serves the other calls) must go on."""
        worker.stop()
        try:
            self._ledger.discard(worker.grant)
        except Exception as error:
            warnings.warn(
                f"the pool could not give grant {worker.grant!r} back to the ledger "
                f"{self._ledger.path}: {error} (its worker process has ended, so the ledger "
                "reclaims the grant at its next look)",
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
