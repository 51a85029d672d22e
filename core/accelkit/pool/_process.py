"""``WorkerProcess``: the pool's side of one worker process (:mod:`accelkit.pool._child`).

A worker is started for one grant, with that grant's environment, and keeps the grant for as long
as it lives: frameworks keep device memory until their process exits, so the devices are not free
before then. Calls are sent one at a time; a worker that dies mid-call is reported as
:class:`~accelkit.WorkerCrashed`, saying how it ended.
"""

from __future__ import annotations

import os
import pickle
import signal
import socket
import subprocess
import sys
from collections.abc import Mapping
from multiprocessing.connection import Connection
from typing import Any, Optional

from accelkit.errors import WorkerCrashed
from accelkit.schedule._grant import Grant
from accelkit.schedule._worker_env import worker_environ

__all__ = ["RemoteTraceback", "WorkerProcess", "main_module"]

_STOP_SECONDS = 5.0
"""How long a worker told to stop may take to exit before it is killed."""
_LOOK_SECONDS = 0.5
"""How often the pool looks whether a worker running a call has ended."""


_WORKER_MAIN = """
import sys
if sys.path and sys.path[0] == "":
    del sys.path[0]
from accelkit.pool._child import main
sys.exit(main(sys.argv))
"""
"""The worker's program (:mod:`accelkit.pool._child`). ``python -c`` (and ``-m``) put the
working directory first on ``sys.path``, where another user may have put a ``pickle.py``
(``/tmp``, a shared project directory): it is taken off before anything is imported, and the
pool's own path put in place before the first call."""


class RemoteTraceback(Exception):
    """The traceback of an exception raised in a worker, set as that exception's ``__cause__``."""

    def __str__(self) -> str:
        return f"\n\n(raised in the pool's worker process)\n{self.args[0]}"


class WorkerProcess:
    """One worker process holding ``grant``; ``key`` says which calls may reuse it."""

    def __init__(self, grant: Grant, env: Mapping[str, Optional[str]], key: Any) -> None:
        self.grant = grant
        self.key = key
        self.calls = 0
        self.handed_over = False
        """Whether the worker holds its grant in the ledger (before, the pool's process does)."""
        ours, theirs = socket.socketpair()
        with ours, theirs:
            self.process = subprocess.Popen(
                [sys.executable, "-c", _WORKER_MAIN, str(theirs.fileno()), str(os.getpid())],
                env=worker_environ(env),
                stdin=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
            )
            self._connection = Connection(os.dup(ours.fileno()))
        self._connection.send({"sys_path": list(sys.path)})

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def call(self, payload: bytes, main: Optional[tuple[str, str]], name: str) -> Any:
        """Run one pickled call; its result, or raise its exception (or WorkerCrashed)."""
        try:
            self._connection.send((main, payload))
            answer = self._answer()
        except (EOFError, OSError):
            raise self._crashed(name) from None
        finally:
            self.calls += 1
        try:
            outcome = pickle.loads(answer)
        except Exception as unreadable:  # a result that pickles but cannot be unpickled
            raise RuntimeError(
                f"the answer of {name} cannot be unpickled in the pool: "
                f"{type(unreadable).__name__}: {unreadable}"
            ) from unreadable
        if outcome[0]:
            return outcome[1]
        error: BaseException = outcome[1]
        error.__cause__ = RemoteTraceback(outcome[2])
        raise error

    def _answer(self) -> bytes:
        """The worker's answer to the call sent; ``EOFError`` when the worker ended without one.
        The end of the worker's socket may not come with the worker's end: a process the call
        started may hold a copy of it (a C library's fork, which the worker cannot see), so the
        worker's own end is looked for every :data:`_LOOK_SECONDS` too."""
        while not self._connection.poll(_LOOK_SECONDS):
            if self.process.poll() is not None and not self._connection.poll(0):
                raise EOFError
        return self._connection.recv_bytes()

    def interrupted(self, error: Optional[BaseException]) -> bool:
        """Whether SIGINT ended this worker's call, which failed with ``error``: the call raised
        ``KeyboardInterrupt``, or the worker died of the signal (it came outside the call's own
        code, before the call began or after it returned)."""
        if isinstance(error, WorkerCrashed):
            return self.process.returncode == -signal.SIGINT
        return isinstance(error, KeyboardInterrupt)

    def stop(self) -> None:
        """Let the worker exit (it ends when its socket closes); kill it if it lingers."""
        self._connection.close()
        try:
            self.process.wait(timeout=_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def _crashed(self, name: str) -> WorkerCrashed:
        self._connection.close()
        code = self.process.wait()
        if code < 0:
            try:
                how = f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"was killed by signal {-code}"
        else:
            how = f"exited with status {code}"
        return WorkerCrashed(
            f"the worker process (pid {self.pid}) running {name} {how} before the call "
            f"returned; its grant {self.grant!r} is given back"
        )


def main_module() -> Optional[tuple[str, str]]:
    """How a worker imports the caller's ``__main__`` to find what is defined there, as
    ``multiprocessing`` does: ``("name", "pkg.mod")`` after ``python -m pkg.mod``,
    ``("path", "/x/job.py")`` for a script. None when no worker can: a session without a script
    file (a REPL, a notebook, ``python -c``), or a package's ``__main__.py``, which would run
    the program again."""
    main = sys.modules.get("__main__")
    name = getattr(getattr(main, "__spec__", None), "name", None)
    if isinstance(name, str):
        return None if name == "__main__" or name.endswith(".__main__") else ("name", name)
    path = getattr(main, "__file__", None)
    return ("path", path) if isinstance(path, str) and path.endswith(".py") else None
