"""Functions the pool tests run in worker processes. ``SEEN_AT_IMPORT`` is what this module saw
when a worker imported it, which the pool must have set before."""

from __future__ import annotations

import os
import shlex
import signal
import sys
import time
from pathlib import Path

SEEN_AT_IMPORT = os.environ.get("CUDA_VISIBLE_DEVICES")


def visible() -> tuple[int, str | None, str | None]:
    """(pid, CUDA_VISIBLE_DEVICES at import, and now)."""
    return os.getpid(), SEEN_AT_IMPORT, os.environ.get("CUDA_VISIBLE_DEVICES")


def tagged(tag: int) -> tuple[int, str | None]:
    """``tag`` and the devices the call sees."""
    return tag, os.environ.get("CUDA_VISIBLE_DEVICES")


def spell(tag: int, seconds: float) -> tuple[int, str | None, float, float]:
    """``tag``, the devices the call sees, and when it began and ended, ``seconds`` apart: a
    span inside its grant, which is held from before it to after it."""
    began = time.monotonic()
    time.sleep(seconds)
    return tag, os.environ.get("CUDA_VISIBLE_DEVICES"), began, time.monotonic()


def pid() -> int:
    return os.getpid()


def clock() -> float:
    """When the call started (the monotonic clock is one for every process of a machine)."""
    return time.monotonic()


def add(a: int, b: int = 0) -> int:
    return a + b


def fail(message: str) -> None:
    raise KeyError(message)


def exit_abruptly(code: int) -> None:
    os._exit(code)


def hold(gate: str, started: str) -> str:
    """Say it started (with its pid), then hold its worker until the file ``gate`` exists."""
    Path(started).write_text(str(os.getpid()))
    while not Path(gate).exists():
        time.sleep(0.01)
    return os.environ.get("CUDA_VISIBLE_DEVICES", "")


def die_leaving_a_child(how: str, pid_file: str) -> None:
    """Start a child that outlives the worker, its pid written to ``pid_file``, then die as a
    crashing worker does. ``how``: "background" (``os.system``, whose programs keep the fds
    the worker may pass on), "fork", or "socket" (a program in the background given a copy of
    the worker's socket, as a C library's fork would keep one)."""
    if how == "fork":
        child = os.fork()
        if child == 0:
            time.sleep(600)
            os._exit(0)
        Path(pid_file).write_text(str(child))
    else:
        if how == "socket":
            copy = os.dup(int(sys.argv[1]))  # the worker's end: main(["-c", FD, PARENT])
            os.set_inheritable(copy, True)
        os.system(f"sleep 600 & echo $! > {shlex.quote(pid_file)}")
    os.kill(os.getpid(), signal.SIGKILL)


def interrupted(dies: bool) -> None:
    """Get SIGINT, as Ctrl-C sends it to the pool's whole process group: raise
    ``KeyboardInterrupt``, or (``dies``) die of it, as a worker does outside the call's code. The
    disposition is set here: a test run started in the background ignores SIGINT."""
    signal.signal(signal.SIGINT, signal.SIG_DFL if dies else signal.default_int_handler)
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(60)  # the signal ends it first


def touch(path: str) -> None:
    Path(path).touch()


def take_step(node_file: str) -> tuple[str, dict[str, list[str]] | None]:
    """The worker's own GPUs, and what a ledger opened in the worker takes (a step of its
    grant, which the worker's environment names)."""
    import json

    from accelkit import Node
    from accelkit.ledger import Ledger

    ledger = Ledger(None, Node.from_dict(json.loads(Path(node_file).read_text())))
    step = ledger.acquire({"GPU": 1})
    return os.environ["CUDA_VISIBLE_DEVICES"], None if step is None else step.ids


def submit_inner(node_file: str, gpus: float) -> str:
    """How a pool in the worker answers a call of ``gpus`` GPUs: "refused at submit: ..." when
    ``submit`` raises, else the call's own outcome."""
    import json

    from accelkit import Node
    from accelkit.pool import AcceleratorPool

    node = Node.from_dict(json.loads(Path(node_file).read_text()))
    with AcceleratorPool(node) as pool:
        try:
            future = pool.submit(visible, resources={"GPU": gpus})
        except Exception as error:
            return f"refused at submit: {type(error).__name__}: {error}"
        return f"ran: {future.result()[2]}"


class TwoPartError(Exception):
    """An exception that pickles, but cannot be unpickled: it gives ``Exception`` one argument
    and takes two, and unpickling calls it with the one."""

    def __init__(self, what: str, why: str) -> None:
        super().__init__(f"{what}: {why}")


def raise_two_part_error() -> None:
    raise TwoPartError("boom", "details")


def return_two_part_error() -> TwoPartError:
    return TwoPartError("boom", "details")
