"""A pool's worker process (``main(["-c", FD, PARENT])``, started by
:class:`~accelkit.pool._process.WorkerProcess`), running the calls it is sent, for as long as the
pool's process ``PARENT`` lives.

The pool starts this process with the grant's visibility environment already in place, so the
variables are there before any of the caller's modules is imported (frameworks read them once,
at import or first use). It imports nothing but the standard library before the first call: a
call's function, and its module, are unpickled here, in the prepared environment.

Messages over the socket ``FD`` (``multiprocessing.connection`` framing): first the setup
``{"sys_path": [...]}``; then, per call, ``(main, payload)`` where ``payload`` pickles
``(fn, args, kwargs)`` and ``main`` says how to import the caller's ``__main__`` when the
payload refers to it (None otherwise): ``("name", "pkg.mod")`` for ``python -m pkg.mod``,
``("path", "/x/job.py")`` for a script. Each answer pickles ``(True, result)`` or
``(False, exception, traceback_text)``. The process ends when the pool closes the socket.

It also ends with the pool's process, however that ends (a kill -9 included), even in the middle
of a call: it holds devices for the pool, and its grant returns only once it has ended. On Linux
the kernel sends it SIGKILL when its parent ends (``PR_SET_PDEATHSIG``); elsewhere a thread
notices that the parent is gone and ends the process.
"""

from __future__ import annotations

import os
import pickle
import runpy
import signal
import sys
import threading
import time
import traceback
import types
from multiprocessing.connection import Connection
from typing import Any, Optional

__all__ = ["MAIN_ALIAS", "main"]

MAIN_ALIAS = "__mp_main__"
"""The name the caller's ``__main__`` script is imported under here, as multiprocessing does,
so its ``if __name__ == "__main__":`` block does not run again."""

_PR_SET_PDEATHSIG = 1
"""prctl(2): the signal this process gets when its parent ends."""
_ORPHAN_EXIT = 70
"""Exit status of a worker whose pool was gone before it could serve (sysexits' EX_SOFTWARE)."""
_WATCH_SECONDS = 0.5
"""How often a worker without ``PR_SET_PDEATHSIG`` looks whether its pool still runs."""


def main(argv: list[str]) -> int:
    """Serve calls until the pool goes away."""
    _end_with(int(argv[2]))
    connection = _own(Connection(int(argv[1])))
    setup = connection.recv()
    sys.path[:] = setup["sys_path"]
    imported_main = False
    main_failure: Optional[bytes] = None
    while True:
        try:
            main, payload = connection.recv()
        except EOFError:
            return 0
        if main is not None and not imported_main:
            imported_main = True  # once: a second try would run its top level again
            main_failure = _import_main(main)
        if main is not None and main_failure is not None:
            connection.send_bytes(main_failure)
        else:
            connection.send_bytes(_answer(payload))


def _own(connection: Connection) -> Connection:
    """``connection``, kept to this process. A call may start processes that outlive it: a
    program in the background (``os.system("logger &")``), or forked ones (multiprocessing's,
    a data loader's). Had they the pool's socket too, the pool would see no end of it when this
    process dies while they run, and would fail the call only once they end; a forked one could
    even answer the pool in this process's place. Programs started get no copy of it
    (close-on-exec), and forked processes close theirs."""
    os.set_inheritable(connection.fileno(), False)
    os.register_at_fork(after_in_child=connection.close)
    return connection


def _answer(payload: bytes) -> bytes:
    """Run one call; its result or its exception, pickled (with the traceback as text)."""
    try:
        fn, args, kwargs = pickle.loads(payload)
        outcome: tuple[Any, ...] = (True, fn(*args, **kwargs))
    except BaseException as error:
        outcome = (False, error, traceback.format_exc())
    return _encoded(outcome)


def _encoded(outcome: tuple[Any, ...]) -> bytes:
    """An answer as bytes. An outcome that cannot be pickled, or an exception that pickles but
    cannot be unpickled (its class takes other arguments than it gives ``Exception``), becomes a
    stand-in ``RuntimeError`` that names it, with the call's traceback: the pool would otherwise
    raise an error of its own unpickling, unrelated to the call. Results are not unpickled
    here, which could cost as much as the call; the pool says when it cannot read one."""
    try:
        data = pickle.dumps(outcome)
    except Exception as error:
        return _stand_in(outcome, f"cannot be pickled back to the pool: {error}")
    if not outcome[0]:
        try:
            pickle.loads(data)
        except Exception as error:
            return _stand_in(outcome, f"pickles, but cannot be unpickled: {error}")
    return data


def _stand_in(outcome: tuple[Any, ...], why: str) -> bytes:
    """The answer that replaces an outcome the pool cannot read: a ``RuntimeError`` saying why."""
    what = "result" if outcome[0] else f"exception {outcome[1]!r}"
    stand_in = RuntimeError(f"the call's {what} {why}")
    return pickle.dumps((False, stand_in, outcome[2] if len(outcome) > 2 else ""))


def _end_with(parent: int) -> None:
    """Make this process end when the pool's process ``parent`` does."""
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"prctl(PR_SET_PDEATHSIG) failed: {os.strerror(error)}")
    else:
        threading.Thread(target=_watch, args=(parent,), name="pool-watch", daemon=True).start()
    if os.getppid() != parent:  # the pool ended before the signal was asked for
        os._exit(_ORPHAN_EXIT)


def _watch(parent: int) -> None:
    """End this process once its parent is gone (it is then another process's child)."""
    while os.getppid() == parent:
        time.sleep(_WATCH_SECONDS)
    os._exit(_ORPHAN_EXIT)


def _import_main(main: tuple[str, str]) -> Optional[bytes]:
    """Import the caller's ``__main__`` as ``__mp_main__`` and let ``__main__`` name it too, as
    ``multiprocessing`` does: by module name after ``python -m pkg.mod`` (so its relative
    imports work), else by path. None once imported; else the answer to every call that refers
    to it, an error saying that the import failed and why (its top level raised, or exited).
    Ctrl-C while it imports is no failure of the script: the worker dies of the signal, as it
    would outside a call, so its pool stops the queue (remembered, it failed every later call
    of a reused worker, saying the script could not be imported)."""
    how, where = main
    try:
        if how == "name":
            content = runpy.run_module(where, run_name=MAIN_ALIAS, alter_sys=True)
        else:
            content = runpy.run_path(where, run_name=MAIN_ALIAS)
    except KeyboardInterrupt:
        raise
    except BaseException as error:
        script = f"python -m {where}" if how == "name" else where
        failure = RuntimeError(
            f"the worker could not import the caller's main module ({script}), where the call's "
            f"function or arguments are defined: {type(error).__name__}: {error}"
        )
        return _encoded((False, failure, traceback.format_exc()))
    module = types.ModuleType(MAIN_ALIAS)
    module.__dict__.update(content)
    sys.modules[MAIN_ALIAS] = sys.modules["__main__"] = module
    return None
