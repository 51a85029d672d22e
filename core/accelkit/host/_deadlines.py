"""One detection's clock: the budgets in force, one deadline, and calls that may block cut at it.

A vendor command is killed at its budget and a probe process too, but an in-process library call
(a hung ``nvmlInit``, ``amdsmi_init``) or a third-party ``detect()`` cannot be killed: it runs in a
daemon thread that the caller stops waiting for when its budget runs out. The thread is left to
finish on its own; while it has not, the same call is not started again (a scheduler detecting
every minute must not pile up hung threads): :func:`running` says so.

Node detection opens a :func:`clock`; under it every budget is also cut at the detection's
deadline, so however many families hang, detection returns by its deadline. Node detection reads
the budgets from the ``ACCELKIT_*_TIMEOUT`` variables (:class:`~accelkit._settings.Budgets`).
A process is different: it can be killed, and must be, since the caller may exit as soon as
detection returns. The clock keeps each process started under it (:func:`spawned`) and, when the
detection ends, kills the group of every one still running, before control returns.
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import os
import threading
import time
from collections.abc import Hashable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Callable, Literal, Optional, TypeVar

from accelkit._settings import Budgets

if TYPE_CHECKING:
    import subprocess

__all__ = [
    "SPREAD_AFTER",
    "Clock",
    "Task",
    "call_within",
    "clock",
    "limit",
    "remember",
    "run_all",
    "running",
    "spawned",
    "start",
]

T = TypeVar("T")
Kind = Literal["command", "probe", "library"]


Child = TypeVar("Child", bound="subprocess.Popen[bytes]")


class Clock:
    """The budgets of one detection, its deadline (``time.monotonic()`` seconds), and the
    processes started under it that have not been reaped."""

    __slots__ = ("_children", "_ended", "_lock", "budgets", "deadline")

    def __init__(self, budgets: Budgets, deadline: float) -> None:
        self.budgets = budgets
        self.deadline = deadline
        self._lock = threading.Lock()
        self._children: set[subprocess.Popen[bytes]] = set()
        self._ended = False

    def remaining(self) -> float:
        """Seconds left before the deadline, never negative."""
        return max(0.0, self.deadline - time.monotonic())

    def end(self) -> None:
        """Kill the process group of every child not yet reaped, and start no more: a worker
        thread still waiting for one may never reach its own kill (the caller exits first)."""
        with self._lock:
            self._ended = True
            left, self._children = self._children, set()
        if not left:
            return  # most detections: no command still running, and ``signal`` not imported
        import signal

        for child in left:
            if child.returncode is None:  # not reaped: its pid is still its group's
                with contextlib.suppress(ProcessLookupError):  # the group is gone already
                    os.killpg(child.pid, signal.SIGKILL)


_current: contextvars.ContextVar[Optional[Clock]] = contextvars.ContextVar(
    "accelkit_detection_clock", default=None
)


@contextlib.contextmanager
def clock(given: Budgets) -> Iterator[Clock]:
    """Run the block as one detection: its deadline is ``given.detection`` seconds from now.
    When the block ends, every process started under it and still running is killed."""
    started = Clock(given, time.monotonic() + given.detection)
    token = _current.set(started)
    try:
        yield started
    finally:
        _current.reset(token)
        started.end()


def limit(requested: Optional[float], kind: Kind, env: Optional[Mapping[str, str]] = None) -> float:
    """Seconds a ``kind`` of call may take: ``requested``, else the budget of its kind, and
    never past the running detection's deadline. Outside a detection the budgets are read from
    ``env`` (the defaults when None)."""
    running = _current.get()
    if running is not None:
        given = running.budgets
    else:
        given = Budgets() if env is None else Budgets.from_env(env)
    spend = requested if requested is not None else getattr(given, kind)
    return spend if running is None else min(spend, running.remaining())


@contextlib.contextmanager
def spawned(popen: Callable[[], Child]) -> Iterator[Child]:
    """The process ``popen()`` starts (in a session of its own), for the block. Under a
    detection it is started holding the clock's lock, so that :meth:`Clock.end` never misses one
    being started, and kept until the block ends; once the detection has ended, none starts
    (``TimeoutError``)."""
    running = _current.get()
    if running is None:
        yield popen()
        return
    with running._lock:
        if running._ended:
            raise TimeoutError("not started: its detection is over")
        child = popen()
        running._children.add(child)
    try:
        yield child
    finally:
        with running._lock:
            running._children.discard(child)


def start(function: Callable[[], None], name: str) -> threading.Thread:
    """``function`` in a new daemon thread, in a copy of this context (so notes and the clock
    follow it); a daemon, so a call that never returns never keeps the process alive."""
    context = contextvars.copy_context()
    thread = threading.Thread(target=context.run, args=(function,), name=name, daemon=True)
    thread.start()
    return thread


class Task:
    """One call :func:`run_all` makes; after it, whether it finished, or which thread still runs
    it and since when (``thread`` None: it never started)."""

    def __init__(self, function: Callable[[], None], name: str) -> None:
        self.function = function
        self.name = name
        self.finished = threading.Event()
        self.thread: Optional[threading.Thread] = None
        self.began = 0.0


SPREAD_AFTER = 0.05
"""Seconds the tasks may queue behind a slow one before another worker thread takes them."""


def run_all(tasks: Sequence[Task], running: Clock) -> None:
    """Run ``tasks`` in order on daemon worker threads, waiting until all finish or the deadline.

    One worker runs them one after another (a thread per task costs more than most detections);
    while tasks are left waiting behind a slow one, another worker starts every
    :data:`SPREAD_AFTER` seconds, so a task that never returns holds up only itself.
    """
    waiting = collections.deque(tasks)
    unfinished = [len(tasks)]
    taking = threading.Lock()
    all_finished = threading.Event()

    def work() -> None:
        while True:
            with taking:
                if not waiting:
                    return
                task = waiting.popleft()
                task.thread, task.began = threading.current_thread(), time.monotonic()
            try:
                task.function()
            finally:
                task.finished.set()
                with taking:
                    unfinished[0] -= 1
                    if not unfinished[0]:
                        all_finished.set()

    if not tasks:
        return
    start(work, "accelkit: detection")
    while not all_finished.wait(min(SPREAD_AFTER, running.remaining())):
        if running.remaining() <= 0:
            return
        if waiting:
            start(work, "accelkit: detection")


_lock = threading.Lock()
_running: dict[Hashable, tuple[str, float, threading.Thread]] = {}


def call_within(function: Callable[[], T], seconds: float, what: str, key: Hashable) -> T:
    """``function()``, or ``TimeoutError`` naming ``what`` when it has not returned after
    ``seconds``; its exception is raised here. While an earlier call under ``key`` is still
    running, ``TimeoutError`` at once instead of a second call."""
    busy = running(key)
    if busy is not None:
        raise TimeoutError(f"{busy}; not called again")
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["value"] = function()
        except BaseException as exc:  # carried to the caller, who decides
            outcome["error"] = exc

    began = time.monotonic()
    thread = start(run, f"accelkit: {what}")
    thread.join(seconds)
    if thread.is_alive():
        remember(key, what, began, thread)
        raise TimeoutError(f"{what} did not return within {seconds:g}s")
    error = outcome.get("error")
    if isinstance(error, BaseException):
        raise error
    return outcome["value"]  # type: ignore[return-value]


def remember(key: Hashable, what: str, since: float, thread: threading.Thread) -> None:
    """Keep a thread its caller stopped waiting for, so that :func:`running` refuses a second
    call under ``key`` while it runs."""
    with _lock:
        _running[key] = (what, since, thread)


def running(key: Hashable) -> Optional[str]:
    """Why the call under ``key`` must not start again (its earlier call is still running), or
    None."""
    with _lock:
        earlier = _running.get(key)
        if earlier is None:
            return None
        if not earlier[2].is_alive():
            del _running[key]
            return None
    what, since, _ = earlier
    return f"{what} has not returned from an earlier call ({time.monotonic() - since:.0f}s ago)"
