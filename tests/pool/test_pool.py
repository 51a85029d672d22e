"""``AcceleratorPool``: calls in worker processes that see their grant, from the node's ledger."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures import wait as wait_for_futures
from pathlib import Path
from typing import Any

import pool_targets as targets
import pytest
from accelkit import InvalidRequest, Node, Unsatisfiable, WorkerCrashed
from accelkit.ledger._holder import Holder
from accelkit.ledger._ledger import Ledger
from accelkit.pool._pool import AcceleratorPool
from pool_support import wait_for


def pool_of(ledger: Ledger, **options: Any) -> AcceleratorPool:
    return AcceleratorPool(ledger.node, ledger=ledger, **options)


def test_each_call_sees_its_grant_from_before_its_module_is_imported(ledger: Ledger) -> None:
    with pool_of(ledger) as pool:
        whole = pool.submit(targets.visible, resources={"GPU": 1}).result()
        halves = [pool.submit(targets.visible, resources={"GPU": 0.5}) for _ in range(2)]
        shared = [f.result() for f in halves]
        nothing = pool.submit(targets.visible).result()
    assert whole[1:] == ("0", "0")
    # Two halves pack onto one device, each in its own process.
    assert [seen[1:] for seen in shared] == [("0", "0"), ("0", "0")]
    assert shared[0][0] != shared[1][0]
    # A call that asks for no device sees none.
    assert nothing[1:] == ("", "")
    assert ledger.grants() == []


def test_map_runs_each_call_on_the_resources_it_names(ledger: Ledger) -> None:
    """``Executor.map`` could name no device, so its calls ran with every device hidden: the
    pool's ``map`` takes ``resources`` and ``max_calls`` as ``submit`` does, and gives the
    results in the order of the arguments."""
    with pool_of(ledger) as pool:
        whole = list(pool.map(targets.tagged, range(3), resources={"GPU": 1}))
        halves = list(
            pool.map(targets.spell, range(4), [0.3] * 4, resources={"GPU": 0.5}, max_calls=0)
        )
        nothing = list(pool.map(targets.tagged, range(2)))
        sums = list(pool.map(targets.add, [1, 2, 3], [10, 20]))  # as zip, the shortest
        with pytest.raises(Unsatisfiable):
            pool.map(targets.tagged, range(2), resources={"GPU": 9})  # submit's refusal, at once
    assert [tag for tag, _ in whole] == [0, 1, 2]
    assert all(seen is not None and len(seen.split(",")) == 1 for _, seen in whole)
    assert [tag for tag, *_ in halves] == [0, 1, 2, 3]
    assert all(seen is not None and len(seen.split(",")) == 1 for _, seen, *_ in halves)
    # No GPU runs more than two halves at once: the spans measured inside the calls lie within
    # their grants, so spans that overlap are grants that overlapped (how many halves a GPU
    # serves over the whole map is timing: a half that ends frees its share for the next).
    for _, seen, began, _ in halves:
        at_once = [
            tag for tag, other, start, end in halves if other == seen and start <= began < end
        ]
        assert len(at_once) <= 2, (seen, at_once)
    assert nothing == [(0, ""), (1, "")]
    assert sums == [11, 22]
    assert ledger.grants() == []


def test_map_waits_until_its_timeout_then_cancels_what_has_not_started(
    ledger: Ledger, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    started = [tmp_path / f"started{n}" for n in range(3)]
    with pool_of(ledger, max_workers=1) as pool:
        results = pool.map(targets.hold, [str(gate)] * 3, map(str, started), timeout=0.3)
        wait_for(started[0])  # the first call runs (and holds the one worker) on the gate
        with pytest.raises(FutureTimeout):
            next(results)
        gate.touch()  # lets the call that started finish; the two others were cancelled
    assert [path.exists() for path in started] == [True, False, False]
    assert ledger.grants() == []


def test_a_worker_imports_nothing_from_the_working_directory(
    ledger: Ledger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker was started with ``python -m``, which puts the working directory first on
    ``sys.path``: a ``pickle.py`` another user left there ran in every worker."""
    planted = "import pathlib\npathlib.Path(__file__).with_name('ran').write_text('x')\n"
    for name in ("pickle", "traceback", "threading", "signal"):
        (tmp_path / f"{name}.py").write_text(planted)
    monkeypatch.chdir(tmp_path)
    with pool_of(ledger) as pool:
        assert pool.submit(targets.add, 2, 3, resources={"GPU": 1}).result() == 5
    assert not (tmp_path / "ran").exists()


def test_max_calls_one_gives_each_call_a_fresh_process_and_returns_the_grant(
    ledger: Ledger,
) -> None:
    with pool_of(ledger) as pool:
        pids = []
        for _ in range(3):
            pids.append(pool.submit(targets.pid, resources={"GPU": 1}).result())
            assert ledger.grants() == []  # the worker has exited, and its grant is back
    assert len(set(pids)) == 3


def test_max_calls_zero_reuses_one_worker_which_keeps_its_grant(ledger: Ledger) -> None:
    with pool_of(ledger) as pool:
        pids = {pool.submit(targets.pid, resources={"GPU": 1}, max_calls=0).result() for _ in "abc"}
        assert len(pids) == 1
        assert [g.ids for g in ledger.grants()] == [{"GPU": ["0"]}]  # held while idle
        assert ledger.grants()[0] and Ledger(ledger.path).view().holdings[0].holder.pid in pids
    assert ledger.grants() == []


def test_an_idle_worker_killed_between_calls_is_replaced(ledger: Ledger) -> None:
    with pool_of(ledger) as pool:
        first = pool.submit(targets.pid, resources={"GPU": 1}, max_calls=0).result()
        os.kill(first, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while Holder.of(first) is not None:  # dead (a zombie counts as dead)
            assert time.monotonic() < deadline
            time.sleep(0.01)
        second = pool.submit(targets.pid, resources={"GPU": 1}, max_calls=0).result()
        assert second != first
        assert [h.holder.pid for h in ledger.view().holdings] == [second]


def test_max_calls_n_recycles_after_n_calls(ledger: Ledger) -> None:
    with pool_of(ledger) as pool:
        pids = [
            pool.submit(targets.pid, resources={"GPU": 1}, max_calls=2).result() for _ in "abcd"
        ]
    assert pids[0] == pids[1] != pids[2] == pids[3]


def test_a_call_without_devices_reuses_its_worker_by_default(ledger: Ledger) -> None:
    with pool_of(ledger) as pool:
        assert [pool.submit(targets.add, 1, b=i).result() for i in range(3)] == [1, 2, 3]
        assert len({pool.submit(targets.pid).result() for _ in "ab"}) == 1


def test_an_exception_comes_back_with_its_remote_traceback(ledger: Ledger) -> None:
    with pool_of(ledger) as pool:
        future = pool.submit(targets.fail, "boom", resources={"GPU": 1})
        error = future.exception()
    assert isinstance(error, KeyError) and error.args == ("boom",)
    assert "in fail" in str(error.__cause__)
    assert ledger.grants() == []


def test_an_exception_that_cannot_be_unpickled_comes_back_as_a_stand_in(ledger: Ledger) -> None:
    """Not as the TypeError of its unpickling, which has nothing to do with the call."""
    with pool_of(ledger) as pool:
        error = pool.submit(targets.raise_two_part_error, resources={"GPU": 1}).exception()
        assert pool.submit(targets.add, 1, resources={"GPU": 1}).result() == 1  # the pool goes on
    assert isinstance(error, RuntimeError)
    assert str(error).startswith(
        "the call's exception TwoPartError('boom: details') pickles, but cannot be unpickled: "
    )
    assert 'raise TwoPartError("boom", "details")' in str(error.__cause__)


def test_a_result_that_cannot_be_unpickled_fails_the_call_saying_so(ledger: Ledger) -> None:
    with pool_of(ledger) as pool:
        error = pool.submit(targets.return_two_part_error, resources={"GPU": 1}).exception()
    assert isinstance(error, RuntimeError)
    assert str(error).startswith(
        "the answer of return_two_part_error cannot be unpickled in the pool: TypeError: "
    )
    assert ledger.grants() == []


def test_a_crashing_call_fails_its_future_and_its_grant_returns(ledger: Ledger) -> None:
    with pool_of(ledger) as pool:
        future = pool.submit(targets.exit_abruptly, 3, resources={"GPU": 2}, max_calls=0)
        with pytest.raises(WorkerCrashed, match=r"running exit_abruptly exited with status 3"):
            future.result()
        assert ledger.grants() == []
        assert pool.submit(targets.add, 2, resources={"GPU": 2}).result() == 2  # the pool goes on


def test_a_worker_killed_mid_call_fails_its_future_and_its_grant_returns(
    ledger: Ledger, tmp_path: Path
) -> None:
    gate, started = tmp_path / "gate", tmp_path / "started"
    with pool_of(ledger) as pool:
        future = pool.submit(targets.hold, str(gate), str(started), resources={"GPU": 1})
        os.kill(int(wait_for(started)), signal.SIGKILL)
        with pytest.raises(WorkerCrashed, match="was killed by SIGKILL"):
            future.result(timeout=60)
        assert ledger.grants() == []


@pytest.mark.parametrize("how", ["background", "fork", "socket"])
def test_a_worker_that_dies_leaving_children_fails_its_call_at_once(
    ledger: Ledger, tmp_path: Path, how: str
) -> None:
    """A call started a program in the background, or forked, then its worker died: the
    children kept the worker's end of the pool's socket, so the pool saw no end of it, and the
    call failed only once they ended (``shutdown(wait=True)`` waited for them). The children
    get no copy of the socket now, and the pool notices the worker's own end, even when a child
    holds one (given it, or forked by a C library)."""
    child = tmp_path / "child"
    with pool_of(ledger) as pool:
        future = pool.submit(targets.die_leaving_a_child, how, str(child), resources={"GPU": 1})
        try:
            with pytest.raises(WorkerCrashed, match="was killed by SIGKILL"):
                future.result(timeout=60)
            if how != "socket" and Path("/proc/self/fd").is_dir():
                fds = Path(f"/proc/{int(wait_for(child))}/fd")
                assert not [fd for fd in fds.iterdir() if os.readlink(fd).startswith("socket:")]
        finally:
            os.kill(int(wait_for(child)), signal.SIGKILL)
    assert ledger.grants() == []


def test_cancelling_a_waiting_call_and_shutting_down_with_cancel_futures(
    ledger: Ledger, tmp_path: Path
) -> None:
    gate, started = tmp_path / "gate", tmp_path / "started"
    pool = pool_of(ledger, max_workers=1)
    running = pool.submit(targets.hold, str(gate), str(started), resources={"GPU": 1})
    wait_for(started)
    cancelled = pool.submit(targets.touch, str(tmp_path / "cancelled"))
    dropped = pool.submit(targets.touch, str(tmp_path / "dropped"))
    assert cancelled.cancel() and not running.cancel()
    pool.shutdown(wait=False, cancel_futures=True)
    with pytest.raises(RuntimeError, match="after shutdown"):
        pool.submit(targets.pid)
    gate.touch()
    assert running.result(timeout=60) == "0"
    pool.shutdown(wait=True)
    assert cancelled.cancelled() and dropped.cancelled()
    assert not (tmp_path / "cancelled").exists() and not (tmp_path / "dropped").exists()
    assert ledger.grants() == []


def test_concurrent_futures_wait_counts_the_cancelled_calls_done(
    ledger: Ledger, tmp_path: Path
) -> None:
    """``concurrent.futures.wait`` and ``as_completed`` count a cancelled future as done once
    its executor has said it will not run it (``set_running_or_notify_cancel``), as
    ``ThreadPoolExecutor`` does when it reaches the call. The pool dropped cancelled calls
    without a word (a call the user cancelled, those ``cancel_futures`` or an interrupted
    worker cancel), so ``wait`` kept waiting for them until its timeout."""
    pool = pool_of(ledger, max_workers=1)
    gates = [tmp_path / f"gate{n}" for n in range(2)]
    started = [tmp_path / f"started{n}" for n in range(2)]
    pool.submit(targets.hold, str(gates[0]), str(started[0]), resources={"GPU": 1})
    wait_for(started[0])
    skipped, served = pool.submit(targets.add, 1), pool.submit(targets.add, 2)
    assert skipped.cancel()
    gates[0].touch()
    assert served.result(timeout=60) == 2  # the pool passed the cancelled call on its way
    assert wait_for_futures([skipped], timeout=0).not_done == set()
    pool.submit(targets.hold, str(gates[1]), str(started[1]), resources={"GPU": 1})
    wait_for(started[1])
    dropped = pool.submit(targets.add, 3)
    pool.shutdown(wait=False, cancel_futures=True)
    assert wait_for_futures([dropped], timeout=60).not_done == set()
    gates[1].touch()
    pool.shutdown()
    assert ledger.grants() == []


def test_a_pool_and_other_holders_never_share_a_device(ledger: Ledger) -> None:
    """The pool takes its grants from the ledger that ``accelkit run`` uses."""
    seven = ledger.acquire({"GPU": 7})
    assert seven is not None
    with pool_of(ledger) as pool:
        assert pool.submit(targets.visible, resources={"GPU": 1}).result()[2] == "7"
        both: Future[Any] = pool.submit(targets.visible, resources={"GPU": 2})
        time.sleep(0.1)
        assert not both.done()  # waits for room, not for anyone's GPUs 0-6
        ledger.release(seven)
        assert both.result(timeout=60)[2] == "0,1"


def test_calls_that_do_not_fit_wait_in_submission_order(ledger: Ledger) -> None:
    everything = ledger.acquire({"GPU": 8})
    assert everything is not None
    with pool_of(ledger) as pool:
        big = pool.submit(targets.clock, resources={"GPU": 8})
        small = pool.submit(targets.clock, resources={"GPU": 1})
        ledger.release(everything)  # both fit now; the first submitted runs first
        assert big.result(timeout=60) < small.result(timeout=60)


def test_bad_calls_fail_at_once(ledger: Ledger) -> None:
    with pool_of(ledger) as pool:
        with pytest.raises(Unsatisfiable):
            pool.submit(targets.pid, resources={"GPU": 9})
        with pytest.raises(InvalidRequest):
            pool.submit(targets.pid, resources={"GPU": -1})
        with pytest.raises(ValueError, match="max_calls must be"):
            pool.submit(targets.pid, max_calls=-1)
    with pytest.raises(ValueError, match="max_workers"):
        AcceleratorPool(ledger.node, max_workers=0, ledger=ledger)
    with pytest.raises(ValueError, match="is not the node of its ledger"):
        AcceleratorPool(Node(), ledger=ledger)


SCRIPT = """
import json, os, sys
from accelkit import Node
from accelkit.ledger._holder import Holder
from accelkit.ledger._ledger import Ledger
from accelkit.pool._pool import AcceleratorPool

def where(n):
    return n, os.environ["CUDA_VISIBLE_DEVICES"]

if __name__ == "__main__":
    node = Node.from_dict(json.loads(sys.argv[2]))
    with AcceleratorPool(node, ledger=Ledger(sys.argv[1], node)) as pool:
        print(json.dumps(pool.submit(where, 5, resources={"GPU": 1}).result()))
"""


def test_functions_of_the_main_script_run_in_workers(tmp_path: Path, h100: Node) -> None:
    import json

    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    argv = [sys.executable, str(script), str(tmp_path / "ledger.json"), json.dumps(h100.to_dict())]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [5, "0"]


NESTED_SCRIPT = """
import json, os, sys
from accelkit import Node
from accelkit.ledger._ledger import Ledger
from accelkit.pool._pool import AcceleratorPool

def leaf():
    return os.environ["CUDA_VISIBLE_DEVICES"]

def outer(node):
    with AcceleratorPool(node) as pool:  # the grant's ledger, as its steps take from there
        return os.environ["CUDA_VISIBLE_DEVICES"], pool.submit(leaf, resources={"GPU": 1}).result()

if __name__ == "__main__":
    node = Node.from_dict(json.loads(sys.argv[2]))
    with AcceleratorPool(node, ledger=Ledger(sys.argv[1], node)) as pool:
        print(json.dumps(pool.submit(outer, node, resources={"GPU": 2}).result()))
"""


def test_a_pool_in_a_worker_runs_functions_of_the_main_script(tmp_path: Path, h100: Node) -> None:
    """In a worker the script is imported as ``__mp_main__``, so what the inner pool sends refers
    there by that name: its worker imports the script too (it found ``__mp_main__`` to be the
    worker's own module, and no ``leaf`` in it), and the step takes the first of the outer
    grant's GPUs."""
    import json

    script = tmp_path / "job.py"
    script.write_text(NESTED_SCRIPT)
    argv = [sys.executable, str(script), str(tmp_path / "ledger.json"), json.dumps(h100.to_dict())]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == ["0,1", "0"]
