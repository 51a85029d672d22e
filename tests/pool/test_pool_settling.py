"""Every call the pool accepts ends with a settled future, and ``shutdown(wait=True)`` (or the
end of a ``with``) returns only after that, whatever fails on the way."""

from __future__ import annotations

import time
from concurrent.futures import Future
from typing import Any

import pool_targets as targets
import pytest
from accelkit.ledger._ledger import Ledger
from accelkit.pool import _pool
from accelkit.pool._pool import AcceleratorPool


class SlowFuture(Future[Any]):
    """A future that takes its result late, as a thread switched out at the wrong moment does."""

    def set_result(self, result: Any) -> None:
        time.sleep(0.2)
        super().set_result(result)


def test_shutdown_returns_only_once_every_future_is_done(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_pool, "Future", SlowFuture)
    pool = AcceleratorPool(ledger.node, ledger=ledger)
    future = pool.submit(targets.add, 1, 2, resources={"GPU": 1})
    pool.shutdown(wait=True)
    assert future.done()
    assert future.result() == 3
