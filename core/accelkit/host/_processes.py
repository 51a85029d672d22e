"""Vendor commands and library probes as child processes, each cut off at its time budget.

A command such as ``nvidia-smi`` can hang, and a library such as dpctl can block for ever or crash
the process that loads it: both run in a child of their own session, and a child past its budget
is killed with everything it started, so detection always answers. A child may also print for
ever (a broken tool in a loop): at most :data:`~accelkit.host._base.MAX_READ_BYTES` of each of
its outputs is read, and a child that writes more is killed as one past its budget (reading all
of it cost 4.8 GB of memory in 3 s, and the budget four times over). A probe's child runs
:data:`_PROBE_MAIN`, which imports the probe function by name and writes its result as one JSON
line, so nothing of the library ever reaches this process.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any, Callable, Optional

from accelkit._settings import Budgets
from accelkit.errors import ProbeError
from accelkit.host import _deadlines as deadlines
from accelkit.host._base import MAX_READ_BYTES, CommandResult, ProbeEnv, ProbeFunction

if TYPE_CHECKING:
    import subprocess

__all__ = ["DEFAULT_COMMAND_TIMEOUT", "DEFAULT_PROBE_TIMEOUT", "run_command", "run_probe"]

DEFAULT_COMMAND_TIMEOUT = Budgets().command
"""Seconds a vendor command may take before it is killed and reported (``nvidia-smi`` can hang),
unless ``ACCELKIT_COMMAND_TIMEOUT`` says otherwise; never past a detection's deadline."""

DEFAULT_PROBE_TIMEOUT = Budgets().probe
"""Seconds a library probe process may take (SYCL and ACL initialisation is slow, not endless),
unless ``ACCELKIT_PROBE_TIMEOUT`` says otherwise; never past a detection's deadline."""


def run_command(
    argv: Sequence[str], timeout: Optional[float], env: Optional[ProbeEnv] = None
) -> CommandResult:
    """:meth:`~accelkit.host.Host.run` on this machine: ``argv`` (no shell) within its budget."""
    argv = list(argv)
    if not argv:
        raise ValueError("run() needs a program")
    if not _on_path(argv[0]):
        blocked = next((c for c in _candidates(argv[0]) if os.path.isfile(c)), None)
        if blocked is not None:  # installed, but it cannot run: no "not installed" for that
            raise PermissionError(f"{blocked} is not executable (its mode lacks x): it cannot run")
        raise FileNotFoundError(f"{argv[0]}: not found on PATH")
    import subprocess  # only where a vendor command is installed: most families find none

    limit = deadlines.limit(timeout, "command", os.environ)
    if limit <= 0:
        raise TimeoutError(f"{argv[0]} was not started: the detection's deadline passed")

    def popen() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            argv,
            env=_environment(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )

    with deadlines.spawned(popen) as process:
        out, err = _outputs(process, argv[0], limit)
    return CommandResult(
        process.returncode,
        out.decode("utf-8", "replace"),
        err.decode("utf-8", "replace"),
    )


def run_probe(
    function: ProbeFunction,
    args: Sequence[Any],
    timeout: Optional[float],
    env: Optional[ProbeEnv],
) -> Any:
    """:meth:`~accelkit.host.Host.probe` on this machine: ``function(import_module, *args)`` in a
    fresh interpreter, within its budget."""
    import subprocess

    limit = deadlines.limit(timeout, "probe", os.environ)
    if limit <= 0:
        raise TimeoutError(
            f"probe {function.__qualname__} was not started: the detection's deadline passed"
        )
    request = json.dumps(
        {
            "path": sys.path,
            "module": function.__module__,
            "name": function.__qualname__,
            "args": list(args),
        }
    )

    def popen() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-c", _PROBE_MAIN],
            env=_environment(env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )

    what = f"probe {function.__module__}.{function.__qualname__}"
    with deadlines.spawned(popen) as process:
        out, err = _outputs(process, what, limit, request.encode(), _printed_past_the_bound)
    lines = out.decode("utf-8", "replace").strip().splitlines()
    try:
        reply = json.loads(lines[-1])
    except (IndexError, ValueError):
        tail = err.decode("utf-8", "replace").strip()[-500:]
        raise ProbeError(
            f"probe process exited with code {process.returncode} without an answer: {tail}",
            crashed=True,
        ) from None
    if "missing" in reply:
        raise ModuleNotFoundError(reply["missing"])
    if "error" in reply:
        raise ProbeError(reply["error"])
    return reply["result"]


def _printed_past_the_bound(message: str) -> ProbeError:
    """The error of a probe process killed for what it printed: no answer comes from it."""
    return ProbeError(message, crashed=True)


def _environment(env: Optional[ProbeEnv]) -> Optional[dict[str, str]]:
    """This process's environment changed by ``env`` (None: removed), for a child; None (the
    child inherits this process's) when ``env`` changes nothing."""
    if not env:
        return None
    environment = {**os.environ, **{k: v for k, v in env.items() if v is not None}}
    for name in (k for k, v in env.items() if v is None):
        environment.pop(name, None)
    return environment


def _on_path(program: str) -> bool:
    """Whether ``program`` is an executable file, on ``PATH`` unless it names a directory (what
    ``shutil.which`` answers, without importing shutil and the compression modules it brings)."""
    return any(os.path.isfile(c) and os.access(c, os.X_OK) for c in _candidates(program))


def _candidates(program: str) -> list[str]:
    """Where ``program`` would be: itself when it names a directory, else in each ``PATH``
    directory."""
    if os.sep in program:
        return [program]
    return [os.path.join(d or os.curdir, program) for d in os.get_exec_path()]


def _outputs(
    process: subprocess.Popen[bytes],
    what: str,
    seconds: float,
    request: bytes = b"",
    flooded: Callable[[str], Exception] = OSError,
) -> tuple[bytes, bytes]:
    """What ``process`` wrote to its stdout and stderr until it exited, ``request`` written to
    its stdin: ``Popen.communicate``, bounded. Past ``seconds`` (``TimeoutError``), or past
    :data:`~accelkit.host._base.MAX_READ_BYTES` on either output (``flooded``), its group is
    killed and the error names ``what`` and the bound."""
    import subprocess

    ends = time.monotonic() + seconds
    pipes = {"stdin": process.stdin, "stdout": process.stdout, "stderr": process.stderr}
    try:
        out, err = _read({n: p for n, p in pipes.items() if p is not None}, ends, request)
        process.wait(max(0.0, ends - time.monotonic()))  # it may close its outputs and go on
    except subprocess.TimeoutExpired:
        _kill_group(process)
        raise TimeoutError(f"{what} did not finish within {seconds:g}s") from None
    except _Flood as flood:
        _kill_group(process)
        raise flooded(
            f"{what} wrote more than {MAX_READ_BYTES} bytes to its {flood}, more than any "
            "machine's devices print; killed it"
        ) from None
    return out, err


class _Flood(Exception):
    """A child wrote more than :data:`~accelkit.host._base.MAX_READ_BYTES` to the output named."""


def _read(pipes: Mapping[str, IO[bytes]], ends: float, request: bytes) -> tuple[bytes, bytes]:
    """A child's stdout and stderr, each read until it closes, and ``request`` written to its
    stdin (if a pipe) meanwhile, as the child reads it; ``TimeoutExpired`` at ``ends``,
    :class:`_Flood` past the bound."""
    import selectors
    import subprocess

    outputs = {"stdout": bytearray(), "stderr": bytearray()}
    with selectors.PollSelector() as selector:
        for name, pipe in pipes.items():
            events = selectors.EVENT_WRITE if name == "stdin" else selectors.EVENT_READ
            selector.register(pipe, events, name)
        while selector.get_map():
            left = ends - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired("child", 0)
            for key, _ in selector.select(left):
                if key.data == "stdin":
                    request = _send(key.fd, request)
                    if not request:  # all sent: the child sees its end
                        selector.unregister(key.fd)
                        pipes["stdin"].close()
                    continue
                chunk = os.read(key.fd, _CHUNK)
                if not chunk:
                    selector.unregister(key.fd)
                    continue
                outputs[key.data] += chunk
                if len(outputs[key.data]) > MAX_READ_BYTES:
                    raise _Flood(key.data)
    return bytes(outputs["stdout"]), bytes(outputs["stderr"])


def _send(fd: int, request: bytes) -> bytes:
    """What is left of ``request`` after one write to the pipe ``fd``, which has room for
    ``PIPE_BUF`` bytes; nothing when the child has closed its end."""
    import select

    try:
        return request[os.write(fd, request[: select.PIPE_BUF]) :]
    except BrokenPipeError:  # it exited without reading: its outputs say why
        return b""


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """Kill a child and whatever it started, stop reading its pipes, then reap it.

    A descendant that left the process group (``setsid``) survives the kill and may hold the
    output pipes open, or fill them, for ever: they are closed, not drained.
    """
    import signal

    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        process.kill()
    for stream in (process.stdin, process.stdout, process.stderr):
        if stream is not None:
            stream.close()
    process.wait()


_CHUNK = 1 << 15
"""Bytes read from a child's output at a time."""


_PROBE_MAIN = """
import sys
if sys.path and sys.path[0] == "":  # python -c: the working directory, first (see below)
    del sys.path[0]
import importlib, json
request = json.loads(sys.stdin.read())
sys.path[:] = request["path"]
class Missing(Exception):
    pass
def load(name):
    try:
        return importlib.import_module(name)
    except ImportError as exc:  # only the library's own import means "not installed"
        raise Missing(f"{type(exc).__name__}: {exc}") from None
try:
    target = importlib.import_module(request["module"])
    for part in request["name"].split("."):
        target = getattr(target, part)
    line = json.dumps({"result": target(load, *request["args"])})
except Missing as exc:
    line = json.dumps({"missing": str(exc)})
except BaseException as exc:
    line = json.dumps({"error": f"{type(exc).__name__}: {exc}"})
sys.stdout.write("\\n" + line + "\\n")
"""
"""The probe process's program. ``python -c`` puts the working directory first on ``sys.path``,
where another user may have put a ``json.py`` (``/tmp``, a shared project directory): it is
taken off before anything is imported, and the caller's own path put in place after."""
