"""Every call the pool accepts ends with a settled future, and ``shutdown(wait=True)`` (or the
end of a ``with``) returns only after that, whatever fails on the way."""

from __future__ import annotations

import re
import threading
import time
import warnings
from concurrent.futures import BrokenExecutor, Future
from pathlib import Path
from typing import Any

import pool_targets as targets
import pytest
from accelkit import LedgerError, Node
from accelkit.ledger._holder import Holder
from accelkit.ledger._ledger import Ledger
from accelkit.pool import _pool
from accelkit.pool._pool import AcceleratorPool
from accelkit.pool._process import WorkerProcess
from accelkit.schedule._grant import Grant
from pool_support import wait_for, wait_until

NOT_GIVEN_BACK = r"could not give grant .* back to the ledger .* is corrupt"
"""The warning of a pool whose ledger cannot take a grant back."""


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


def test_a_done_callback_may_shut_the_pool_down_and_wait(ledger: Ledger, tmp_path: Path) -> None:
    """The callback runs as the call settles; its ``shutdown(wait=True)`` returns (it waited
    for the call's own slot before, which is freed only after the callbacks)."""
    gate, started = tmp_path / "gate", tmp_path / "started"
    pool = AcceleratorPool(ledger.node, ledger=ledger)
    future = pool.submit(targets.hold, str(gate), str(started), resources={"GPU": 1})
    shut = threading.Event()
    future.add_done_callback(lambda done: (pool.shutdown(wait=True), shut.set()))
    wait_for(started)  # the callback is in place before the call can end
    gate.touch()
    assert shut.wait(30), "shutdown(wait=True) from a done-callback still waits after 30 s"
    assert ledger.grants() == []


def test_a_done_callback_may_submit_and_wait_with_a_single_worker(
    ledger: Ledger, tmp_path: Path
) -> None:
    """A follow-up call chained on an answer gets the only slot, that of the call whose
    callback waits for it."""
    gate, started = tmp_path / "gate", tmp_path / "started"
    pool = AcceleratorPool(ledger.node, ledger=ledger, max_workers=1)
    future = pool.submit(targets.hold, str(gate), str(started), resources={"GPU": 1})
    follow_ups: list[Any] = []
    followed = threading.Event()

    def follow_up(done: Future[str]) -> None:
        try:
            follow_ups.append(pool.submit(targets.add, 2, resources={"GPU": 1}).result(10))
        except BaseException as error:
            follow_ups.append(error)
        followed.set()

    future.add_done_callback(follow_up)
    wait_for(started)
    gate.touch()
    assert followed.wait(30)
    shut_down(pool)
    assert follow_ups == [2]


def test_a_ledger_that_cannot_take_a_grant_back_loses_no_result(
    ledger: Ledger, tmp_path: Path
) -> None:
    """The result stands, and the failure is a warning: the worker has ended, so the ledger
    reclaims its grant once it can be read again."""
    gate, started = tmp_path / "gate", tmp_path / "started"
    pool = AcceleratorPool(ledger.node, ledger=ledger)
    future = pool.submit(targets.hold, str(gate), str(started), resources={"GPU": 1})
    wait_for(started)
    readable = ledger.path.read_text()
    ledger.path.write_text(readable[:20])  # cut short: unreadable until it is restored
    with pytest.warns(RuntimeWarning, match=NOT_GIVEN_BACK):
        gate.touch()
        assert future.result(timeout=30) == "0"
    ledger.path.write_text(readable)
    assert ledger.grants() == []  # reclaimed: its holder, the worker, has ended
    shut_down(pool)


def test_warnings_as_errors_stop_every_worker_all_the_same(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Under ``-W error`` (a test suite's ``filterwarnings = error``), the warning of a grant the
    ledger cannot take back is an exception: it must not leave the other workers running."""
    gate = tmp_path / "gate"
    pool = AcceleratorPool(ledger.node, ledger=ledger, max_workers=3)
    futures = [
        pool.submit(
            targets.hold, str(gate), str(tmp_path / f"started{n}"), resources={"GPU": 1},
            max_calls=0,
        )
        for n in range(3)
    ]  # fmt: skip
    for n in range(3):  # three calls at once: three workers, kept once their calls end
        wait_for(tmp_path / f"started{n}")
    gate.touch()
    assert sorted(f.result(timeout=60) for f in futures) == ["0", "1", "2"]
    workers = list(pool._idle)
    assert len(workers) == 3

    def unreadable(grant: object) -> None:
        raise LedgerError("the ledger is corrupt")

    monkeypatch.setattr(ledger, "discard", unreadable)
    raised: list[BaseException] = []
    monkeypatch.setattr(threading, "excepthook", lambda hook: raised.append(hook.exc_value))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        shut_down(pool)
    assert [w.alive() for w in workers] == [False, False, False]
    assert len(raised) == 1 and isinstance(raised[0], RuntimeWarning)
    assert re.search(NOT_GIVEN_BACK, str(raised[0]))


def test_a_ledger_that_cannot_take_a_spare_workers_grant_back_fails_only_the_call(
    ledger: Ledger,
) -> None:
    """The dispatcher stops an idle worker to make room; the ledger fails it, and then the call
    that wanted the room: that call's future says so, and the pool goes on."""
    pool = AcceleratorPool(ledger.node, ledger=ledger, max_workers=1)
    assert pool.submit(targets.add, 1, resources={"GPU": 1}, max_calls=0).result() == 1
    readable = ledger.path.read_text()
    ledger.path.write_text(readable[:20])  # cut short
    with pytest.warns(RuntimeWarning, match=NOT_GIVEN_BACK):
        wants_room = pool.submit(targets.add, 2, resources={"GPU": 2})
        assert isinstance(wants_room.exception(timeout=30), LedgerError)
    ledger.path.write_text(readable)
    assert ledger.grants() == []  # the idle worker's grant, reclaimed
    assert pool.submit(targets.add, 3, resources={"GPU": 2}).result(timeout=60) == 3
    shut_down(pool)
    assert ledger.grants() == []


@pytest.mark.parametrize("step", ["env", "transfer"])
def test_a_ledger_failing_as_a_worker_starts_fails_the_call_and_keeps_no_grant(
    ledger: Ledger, step: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The grant is taken before the worker's environment is made and before the worker
    becomes its holder; when either fails, the call fails and the grant is given back."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise LedgerError("the disk is full")

    failing = Ledger(ledger.path, ledger.node)
    monkeypatch.setattr(failing, step, refuse)
    pool = AcceleratorPool(ledger.node, ledger=failing)
    future = pool.submit(targets.pid, resources={"GPU": 1})
    with pytest.raises(LedgerError, match="the disk is full"):
        future.result(timeout=60)
    assert ledger.grants() == []
    shut_down(pool)


STUCK = "the ledger's lock has been held for 30 s"
KEPT = "the pool's own process holds it: the pool gives it back once it can"


def stuck_as_it_hands_over(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Make ``ledger`` fail to hand a grant over to a worker, and to take one back, as a lock
    held by a stopped process makes it fail, until the event returned is set."""

    def transfer(grant: Grant, holder: Holder) -> None:
        if not usable.is_set():
            raise LedgerError(STUCK)
        real_transfer(grant, holder)

    def discard(grant: Grant) -> bool:
        if not usable.is_set():
            raise LedgerError(STUCK)
        return real_discard(grant)

    usable = threading.Event()
    real_transfer, real_discard = ledger.transfer, ledger.discard
    monkeypatch.setattr(ledger, "transfer", transfer)
    monkeypatch.setattr(ledger, "discard", discard)
    return usable


@pytest.mark.parametrize("when", ["before the next call", "while the pool is idle", "at shutdown"])
def test_a_grant_the_ledger_failed_to_hand_over_is_given_back_once_it_can(
    ledger: Ledger, h100: Node, when: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The grant was still the pool's own (its worker never became its holder), and the pool's
    process lives on: the ledger never reclaimed it, and its GPU was lost to the node for as
    long as the pool's process ran, after shutdown too. The pool keeps it, says so, and gives
    it back once the ledger takes it."""
    failing = Ledger(ledger.path, h100)
    usable = stuck_as_it_hands_over(failing, monkeypatch)
    pool = AcceleratorPool(h100, ledger=failing)
    with pytest.warns(RuntimeWarning, match=KEPT):
        future = pool.submit(targets.pid, resources={"GPU": 1})
        with pytest.raises(LedgerError, match=STUCK):
            future.result(timeout=60)
    (held,) = ledger.view().holdings
    assert held.holder == Holder.current()
    usable.set()
    if when == "before the next call":
        assert pool.submit(targets.add, 1, resources={"GPU": 8}).result(timeout=60) == 1
    elif when == "while the pool is idle":
        wait_until(lambda: ledger.grants() == [])
    shut_down(pool)
    assert ledger.grants() == []


def test_a_grant_the_ledger_never_takes_back_is_said_to_stay_held_at_shutdown(
    ledger: Ledger, h100: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    failing = Ledger(ledger.path, h100)
    stuck_as_it_hands_over(failing, monkeypatch)
    pool = AcceleratorPool(h100, ledger=failing)
    with pytest.warns(RuntimeWarning, match=KEPT):
        assert isinstance(pool.submit(targets.pid, resources={"GPU": 1}).exception(60), LedgerError)
    with pytest.warns(RuntimeWarning, match=f"{STUCK}; this process holds it until it ends"):
        shut_down(pool)
    (held,) = ledger.view().holdings
    assert ledger.discard(held.grant)


def test_a_failing_dispatcher_fails_the_calls_it_has_not_started(
    ledger: Ledger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever breaks the dispatcher (here, looking whether an idle worker lives), the calls
    waiting for it fail with the cause, the pool refuses new ones, the running call ends as it
    would have, and shutdown stops the workers."""
    gate, started = tmp_path / "gate", tmp_path / "started"
    pool = AcceleratorPool(ledger.node, ledger=ledger, max_workers=1)
    running = pool.submit(targets.hold, str(gate), str(started), max_calls=0)
    wait_for(started)
    waiting = [pool.submit(targets.add, n, max_calls=0) for n in (1, 2)]  # for the busy worker
    real_alive = WorkerProcess.alive

    def alive_unless_dispatching(worker: WorkerProcess) -> bool:
        if threading.current_thread().name == "accelkit-pool":
            raise OSError("the process table cannot be read")
        return real_alive(worker)

    monkeypatch.setattr(WorkerProcess, "alive", alive_unless_dispatching)
    gate.touch()  # the worker comes back idle, and the dispatcher looks at it
    assert running.result(timeout=60) == ""
    for future in waiting:
        error = future.exception(timeout=30)
        assert isinstance(error, BrokenExecutor)
        assert "dispatcher failed (OSError: the process table cannot be read)" in str(error)
        assert isinstance(error.__cause__, OSError)
    with pytest.raises(BrokenExecutor, match="starts no more calls"):
        pool.submit(targets.add, 3)
    shut_down(pool)
    assert ledger.grants() == []


def shut_down(pool: AcceleratorPool, timeout: float = 60) -> None:
    """``pool.shutdown(wait=True)``, failing the test rather than hanging it."""
    thread = threading.Thread(target=pool.shutdown, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"shutdown(wait=True) still waits after {timeout} s"
