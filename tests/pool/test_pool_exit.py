"""A pool's submitted calls run to the end when the interpreter exits, as the pending futures of
``concurrent.futures`` executors do, and its workers give their grants back."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pool_targets as targets
import pytest
from accelkit.errors import WorkerCrashed
from accelkit.ledger._ledger import Ledger
from accelkit.pool import _exit
from accelkit.pool._pool import AcceleratorPool

EXITING = """
import json, sys, time
from pathlib import Path
from accelkit import Node
from accelkit.pool import AcceleratorPool

def mark(path):
    time.sleep(0.3)  # still running when the script's last line is done
    Path(path).write_text("done")

if __name__ == "__main__":
    ledger, node_file, marker, ending = sys.argv[1:]
    node = Node.from_dict(json.loads(Path(node_file).read_text()))
    pool = AcceleratorPool(node, ledger=ledger)
    pool.submit(mark, marker, resources={"GPU": 1}, max_calls=0)  # its worker then idles
    if ending == "shutdown(wait=False)":
        pool.shutdown(wait=False)
"""


@pytest.mark.parametrize("ending", ["nothing", "shutdown(wait=False)"])
def test_the_interpreter_waits_for_submitted_calls_before_it_exits(
    ledger: Ledger, node_files: dict[str, Path], tmp_path: Path, ending: str
) -> None:
    script, marker = tmp_path / "exiting.py", tmp_path / "marker"
    script.write_text(EXITING)
    node_file = str(node_files["nvidia-h100-8gpu"])
    argv = [sys.executable, str(script), str(ledger.path), node_file, str(marker), ending]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert marker.read_text() == "done"
    # The idle worker was stopped and its grant given back, not left for the ledger to reclaim.
    assert json.loads(ledger.path.read_text())["grants"] == []


def test_at_exit_a_pool_waiting_for_another_pools_idle_worker_is_served(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pool ``a``'s idle worker holds every GPU, which pool ``b``'s call waits for; the exit
    hook shuts ``b`` down first. Both must be told first, so that ``a`` retires its worker."""
    a = AcceleratorPool(ledger.node, ledger=ledger)
    b = AcceleratorPool(ledger.node, ledger=ledger)
    assert a.submit(targets.add, 1, resources={"GPU": 8}, max_calls=0).result(timeout=60) == 1
    waiting = b.submit(targets.add, 2, resources={"GPU": 1})
    monkeypatch.setattr(_exit, "_pools", [b, a])  # the order that waited forever
    monkeypatch.setattr(_exit, "_exiting", False)
    exiting = threading.Thread(target=_exit._wait_at_exit, daemon=True)
    exiting.start()
    exiting.join(60)
    assert not exiting.is_alive(), "the exit hook still waits after 60 s"
    assert waiting.result(timeout=0) == 2
    assert ledger.grants() == []


FORKS = """
def fork_holding(*locks):
    # fork while another thread holds ``locks``: the child has them held, with no thread to
    # release them; the parent's thread lets go once the child is made
    held, done = threading.Event(), threading.Event()

    def hold():
        with contextlib.ExitStack() as stack:
            for lock in locks:
                stack.enter_context(lock)
            held.set()
            done.wait()

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait()
    child = os.fork()
    if child:
        done.set()
        holder.join()
    return child


def reap(child, seconds, what):
    # wait for the forked child; one still there after ``seconds`` is killed and reported
    deadline = time.monotonic() + seconds
    while os.waitpid(child, os.WNOHANG) == (0, 0):
        if time.monotonic() > deadline:
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
            sys.exit(f"the forked child still had not {what} after {seconds} s")
        time.sleep(0.01)
"""
"""Forking and reaping for the scripts below, which run in processes of their own."""


FORKING = (
    """
import contextlib, os, signal, sys, threading, time
from accelkit.pool import _exit
from accelkit.pool._pool import AcceleratorPool
"""
    + FORKS
    + """
if __name__ == "__main__":
    pool = AcceleratorPool(ledger=sys.argv[1])
    pool.submit(abs, -1).result()  # the pool has a dispatcher: it is waited for at exit
    child = fork_holding(_exit._exit_lock, pool._condition)
    if child == 0:
        sys.exit(0)  # the child's exit must not wait for the parent's pool, nor its locks
    reap(child, 20, "exited")
    pool.shutdown()
"""
)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")
def test_a_forked_child_exits_without_waiting_for_the_parents_pools(
    ledger: Ledger, tmp_path: Path
) -> None:
    script = tmp_path / "forking.py"
    script.write_text(FORKING)
    argv = [sys.executable, str(script), str(ledger.path)]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


FORKED_WHILE_DECIDING = (
    """
import contextlib, json, os, signal, sys, threading, time
from accelkit import Node
from accelkit.ledger._ledger import Ledger
from accelkit.pool._pool import AcceleratorPool
"""
    + FORKS
    + """
if __name__ == "__main__":
    node = Node.from_dict(json.load(open(sys.argv[2])))
    ledger = Ledger(sys.argv[1], node)
    pool = AcceleratorPool(node, ledger=ledger)
    assert pool.submit(abs, -1).result() == 1
    # another thread decides at the fork: the child gets its locks held
    child = fork_holding(ledger._turns._threads, ledger._file._threads)
    if child == 0:
        ledger.release(ledger.acquire({"GPU": 1}))
        try:
            pool.submit(abs, -2)
        except RuntimeError as error:
            print(error, flush=True)
            os._exit(0)
        os._exit(3)  # accepted, and never to run
    reap(child, 30, "used the ledger")
    pool.shutdown()
"""
)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")
def test_a_forked_child_uses_the_ledger_and_is_told_the_pool_is_not_its_own(
    ledger: Ledger, node_files: dict[str, Path], tmp_path: Path
) -> None:
    """A thread that held the ledger's locks at the fork left them held in the child, which
    waited for them forever; and the child's submit to its parent's pool was accepted, its call
    never to run (the workers and the dispatcher are the parent's)."""
    script = tmp_path / "forking.py"
    script.write_text(FORKED_WHILE_DECIDING)
    argv = [sys.executable, str(script), str(ledger.path), str(node_files["nvidia-h100-8gpu"])]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=90)
    assert result.returncode == 0, result.stderr
    assert "from which this process" in result.stdout
    assert "was forked" in result.stdout
    assert ledger.grants() == []


def test_calls_started_once_the_exit_began_run_one_at_a_time_without_threads(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Python 3.12 starts no thread once its exit began, which it says (``_SHUTTING_DOWN``)
    before this module's exit hook runs when another hook ran first: the calls still run."""
    pool = AcceleratorPool(ledger.node, ledger=ledger)
    assert pool.submit(targets.add, 1).result(timeout=60) == 1  # its dispatcher is running

    def refuse(thread: threading.Thread) -> None:
        raise RuntimeError("can't create new thread at interpreter shutdown")

    monkeypatch.setattr(threading, "_SHUTTING_DOWN", True, raising=False)
    monkeypatch.setattr(threading.Thread, "start", refuse)
    futures = [pool.submit(targets.add, n, resources={"GPU": 1}) for n in range(3)]
    assert [future.result(timeout=60) for future in futures] == [0, 1, 2]
    monkeypatch.undo()
    pool.shutdown()
    assert ledger.grants() == []


INTERRUPTED = """
import json, signal, sys, time
from pathlib import Path
from accelkit import Node
from accelkit.pool import AcceleratorPool

def mark(directory, i):
    Path(directory, f"started{i}").touch()
    time.sleep(30)  # until the terminal's SIGINT ends it

def busy_main_thread(signum, frame):
    # The main thread runs C code when Ctrl-C comes: it raises only once the pool has started
    # the next call or cancelled it.
    deadline = time.monotonic() + 60
    while not (futures[1].running() or futures[1].done()) and time.monotonic() < deadline:
        time.sleep(0.01)
    raise KeyboardInterrupt

if __name__ == "__main__":
    ledger, node_file, directory, main_thread = sys.argv[1:]
    # As for a terminal's foreground job, also where the tests run with SIGINT ignored (started
    # in the background): the workers then get the default, a KeyboardInterrupt, too.
    busy = main_thread == "busy"
    signal.signal(signal.SIGINT, busy_main_thread if busy else signal.default_int_handler)
    node = Node.from_dict(json.loads(Path(node_file).read_text()))
    with AcceleratorPool(node, ledger=ledger, max_workers=1) as pool:
        futures = [pool.submit(mark, directory, i, resources={"GPU": 8}) for i in range(4)]
        Path(directory, "submitted").touch()
        futures[0].result()
"""


@pytest.mark.parametrize("main_thread", ["waiting", "busy"])
def test_ctrl_c_in_a_with_block_cancels_the_calls_not_started(
    ledger: Ledger, node_files: dict[str, Path], tmp_path: Path, main_thread: str
) -> None:
    """Ctrl-C reaches the script and its running worker (one process group); the calls not
    started are cancelled. It started the queued calls one after another, as
    ``concurrent.futures`` executors do, so Ctrl-C meant "run the rest". A main thread that
    raises ``KeyboardInterrupt`` late (busy in C code) left the pool time to start the next
    call on a fresh worker, which the signal never reached, so Ctrl-C waited for that call."""
    script = tmp_path / "interrupted.py"
    script.write_text(INTERRUPTED)
    node_file = str(node_files["nvidia-h100-8gpu"])
    argv = [sys.executable, str(script), str(ledger.path), node_file, str(tmp_path), main_thread]
    process = subprocess.Popen(argv, start_new_session=True, stderr=subprocess.PIPE, text=True)
    try:
        ready = [tmp_path / "started0", tmp_path / "submitted"]
        deadline = time.monotonic() + 60
        while not all(p.exists() for p in ready) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert all(p.exists() for p in ready), f"not all of {ready} were written"
        os.killpg(process.pid, signal.SIGINT)  # what the terminal sends on Ctrl-C
        _, stderr = process.communicate(timeout=20)  # a queued call would sleep 30 s
    finally:
        with contextlib.suppress(ProcessLookupError):  # the script and its workers, if left
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode != 0 and "KeyboardInterrupt" in stderr
    assert sorted(p.name for p in tmp_path.glob("started*")) == ["started0"]
    assert json.loads(ledger.path.read_text())["grants"] == []


@pytest.mark.parametrize("how", ["KeyboardInterrupt", "killed by SIGINT"])
def test_a_worker_interrupted_by_sigint_cancels_the_calls_not_started(
    ledger: Ledger, tmp_path: Path, how: str
) -> None:
    """The worker got Ctrl-C's SIGINT, in its call or outside it; the main thread (this test)
    has not raised ``KeyboardInterrupt`` yet, and may not for long. The next call must not
    start meanwhile: the signal never reaches its fresh worker."""
    pool = AcceleratorPool(ledger.node, ledger=ledger, max_workers=1)
    dies = how == "killed by SIGINT"
    first = pool.submit(targets.interrupted, dies, resources={"GPU": 8})
    marks = [str(tmp_path / f"started{i}") for i in range(2)]
    queued = [pool.submit(targets.touch, mark, resources={"GPU": 8}) for mark in marks]
    error = first.exception(timeout=60)  # not result(): it would raise KeyboardInterrupt here
    assert isinstance(error, WorkerCrashed if dies else KeyboardInterrupt), repr(error)
    assert [future.cancelled() for future in queued] == [True, True]  # before the first settled
    pool.shutdown()
    assert list(tmp_path.glob("started*")) == []
    assert ledger.grants() == []


def test_a_cancelled_calls_done_callback_may_shut_the_pool_down(ledger: Ledger) -> None:
    """A worker interrupted by SIGINT cancels the calls not started; cancelling runs their
    done-callbacks, which may call the pool (``shutdown(wait=True)`` here). They ran under the
    pool's lock: the callback waited for the dispatcher, which waited for the lock, and neither
    the interrupted call nor any later shutdown ever finished (the re-review found it)."""
    pool = AcceleratorPool(ledger.node, ledger=ledger, max_workers=1)
    first = pool.submit(targets.interrupted, False, resources={"GPU": 8})
    queued = pool.submit(targets.add, 1, resources={"GPU": 8})
    queued.add_done_callback(lambda _: pool.shutdown(wait=True))
    assert isinstance(first.exception(timeout=30), KeyboardInterrupt)
    assert queued.cancelled()
    closing = threading.Thread(target=pool.shutdown, daemon=True)
    closing.start()
    closing.join(30)
    assert not closing.is_alive(), "shutdown hangs"


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_calls_held_back_are_cancelled_even_when_settling_the_interrupted_call_fails(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dispatcher waits for the calls a worker's SIGINT held back: they are cancelled
    whatever happens while the interrupted call is settled, or no later call would start."""
    pool = AcceleratorPool(ledger.node, ledger=ledger, max_workers=1)
    settle = pool._settle

    def settle_then_fail(*args: object, **kwargs: object) -> None:
        settle(*args, **kwargs)  # type: ignore[arg-type]
        raise RuntimeError("settling failed")

    monkeypatch.setattr(pool, "_settle", settle_then_fail)
    first = pool.submit(targets.interrupted, False, resources={"GPU": 8})
    queued = pool.submit(targets.add, 1, resources={"GPU": 8})
    assert isinstance(first.exception(timeout=30), KeyboardInterrupt)
    monkeypatch.undo()
    closing = threading.Thread(target=pool.shutdown, daemon=True)
    closing.start()
    closing.join(30)
    assert queued.cancelled() and not closing.is_alive(), "the held-back call was never cancelled"
