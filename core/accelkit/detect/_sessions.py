"""A library layer's work in an in-process vendor library, bounded as a whole.

An in-process library (NVML, amdsmi) can block in any call, not only in its import and ``init``:
a per-device query on a hung driver (``nvmlDeviceGetCount``, ``nvmlDeviceGetHandleByIndex``)
never returns either. So :func:`detect_layers` runs a ``library`` layer off its thread
(:func:`run_library_layer`) and, from the moment the layer enters a
:func:`~accelkit.detect.library_session`, waits for the import, ``init`` and every call of the
block at most ``ACCELKIT_LIBRARY_TIMEOUT`` in all; past it the layer times out, naming the call it
is stuck in, and the next layer answers. The stuck thread cannot be killed: it is left to finish
on its own, and until it does the library is not used again (the next session is refused at
once, saying why), so a detection every minute does not pile up threads in a hung driver. The
session's ``shutdown`` keeps its own budget: one that blocks is only noted, and what the block
found is kept. A layer's work outside a session (a probe process, a file read) has its own
budget, as before.
"""

from __future__ import annotations

import contextvars
import sys
import threading
import time
from collections.abc import Hashable
from typing import Any, Callable, Optional, TypeVar

from accelkit._settings import LIBRARY_TIMEOUT_VAR
from accelkit.host import Host
from accelkit.host import _deadlines as deadlines

__all__ = ["Watch", "run_library_layer", "watched"]

T = TypeVar("T")
POLL = 0.05
"""Seconds between looks at a library layer that has not entered a session (or has left it)."""


class Watch:
    """What a library layer's thread is doing in its session, for the thread waiting on it:
    the session's deadline (None outside a session), the step it is in and the key under which
    a thread stuck in that step keeps the library from being used again."""

    __slots__ = ("budget", "deadline", "key", "library", "name", "step")

    def __init__(self) -> None:
        self.budget = 0.0
        self.deadline: Optional[float] = None
        self.step = ""
        self.key: Hashable = None
        self.name = ""
        self.library: Any = None


_watch: contextvars.ContextVar[Optional[Watch]] = contextvars.ContextVar(
    "accelkit_library_layer", default=None
)


def watched() -> Optional[Watch]:
    """The watch of the library layer this thread runs, or None outside one."""
    return _watch.get()


def step(watch: Watch, function: Callable[[], T], what: str, key: Hashable) -> T:
    """``function()`` as a step of the watched session: refused at once while a thread of an
    earlier detection is stuck under ``key``; the session's budget starts at its first step."""
    busy = deadlines.running(key)
    if busy is not None:
        raise TimeoutError(f"{busy}; {watch.name} is not used again until it returns")
    if watch.deadline is None:
        watch.budget = deadlines.limit(None, "library")
        watch.deadline = time.monotonic() + watch.budget
    watch.step, watch.key = what, key
    return function()


def run_library_layer(host: Host, layer: Callable[[Host], T]) -> T:
    """``layer(host)`` on a thread of its own, cut when its library session outlasts the
    library budget (``TimeoutError`` naming the call it is stuck in)."""
    watch, done = Watch(), threading.Event()
    outcome: dict[str, object] = {}

    def run() -> None:
        _watch.set(watch)
        try:
            outcome["value"] = layer(host)
        except BaseException as exc:  # carried to the caller, who decides
            outcome["error"] = exc
        finally:
            done.set()

    thread = deadlines.start(run, "accelkit: library layer")
    while not done.wait(POLL if watch.deadline is None else watch.deadline - time.monotonic()):
        deadline, key = watch.deadline, watch.key
        if deadline is None or time.monotonic() < deadline:
            continue
        where = _stuck_in(thread, watch)
        deadlines.remember(key, where, deadline - watch.budget, thread)
        raise TimeoutError(
            f"{where} did not return within {watch.budget:g}s ({LIBRARY_TIMEOUT_VAR}); "
            f"{watch.name} is not used again until it returns"
        )
    error = outcome.get("error")
    if isinstance(error, BaseException):
        raise error
    return outcome["value"]  # type: ignore[return-value]


def _stuck_in(thread: threading.Thread, watch: Watch) -> str:
    """The call of the session's library ``thread`` is in (the outermost frame that is one of
    the library's functions: ``pynvml.nvmlDeviceGetCount()``), else the watched step."""
    if watch.library is None:
        return watch.step
    named: dict[Any, set[str]] = {}
    for name, value in vars(watch.library).items():
        code = getattr(getattr(value, "__wrapped__", value), "__code__", None)
        if code is not None:
            named.setdefault(code, set()).add(name)
    found = None
    frame = sys._current_frames().get(thread.ident or 0)
    while frame is not None:  # innermost first: the last found is the outermost
        names = named.get(frame.f_code, ())
        found = next(iter(names)) if len(names) == 1 else found
        frame = frame.f_back
    return watch.step if found is None else f"{watch.name}.{found}()"
