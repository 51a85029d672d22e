"""``Host``: everything a manager may look at, and the only way it looks.

A manager never opens a file, reads a variable, runs a program or imports a vendor library
except through the ``Host`` it is given. That single seam is what lets every plugin be tested
without hardware (:class:`FakeHost`), lets a node be recorded and replayed (snapshots), and lets
the conformance kit prove that detection touches nothing else.

Paths are always written as they are on the machine (``/sys/class/drm``); a host maps them under
its ``root``.
"""

from __future__ import annotations

import fnmatch
import importlib
import importlib.util
import json
import os
import posixpath
import re
import stat
import sys
from collections.abc import Iterable, Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Optional, Union

from accelkit._settings import Budgets
from accelkit.host import _deadlines as deadlines

if TYPE_CHECKING:
    import subprocess
    from pathlib import Path

__all__ = [
    "DEFAULT_COMMAND_TIMEOUT",
    "DEFAULT_PROBE_TIMEOUT",
    "CommandResult",
    "CommandSpec",
    "FakeHost",
    "Host",
    "HostView",
    "LocalHost",
    "ProbeEnv",
    "ProbeError",
    "natural_key",
    "resolve_under",
]

DEFAULT_COMMAND_TIMEOUT = Budgets().command
"""Seconds a vendor command may take before it is killed and reported (``nvidia-smi`` can hang),
unless ``ACCELKIT_COMMAND_TIMEOUT`` says otherwise; never past a detection's deadline."""

DEFAULT_PROBE_TIMEOUT = Budgets().probe
"""Seconds a library probe process may take (SYCL and ACL initialisation is slow, not endless),
unless ``ACCELKIT_PROBE_TIMEOUT`` says otherwise; never past a detection's deadline."""

MAX_READ_BYTES = 1 << 20
"""Larger files are not device facts; reading stops there."""


class CommandResult(NamedTuple):
    """What a command returned: exit code and decoded output."""

    returncode: int
    stdout: str
    stderr: str = ""


class ProbeError(RuntimeError):
    """A probe function raised, or its process died (``crashed``), in the probe process."""

    def __init__(self, message: str, *, crashed: bool = False) -> None:
        super().__init__(message)
        self.crashed = crashed


ProbeFunction = Callable[..., Any]
"""A module-level function ``f(import_module, *args)`` whose result is plain JSON data."""

ProbeEnv = Mapping[str, Optional[str]]
"""Variables a probe's process runs with, on top of this process's (None: removed): a library
that reads its variables when first used (Level Zero's device order) sees them from the start."""

CommandSpec = Union[
    "tuple[int, str]",
    "tuple[int, str, str]",
    BaseException,
    "type[BaseException]",
    Callable[[Sequence[str]], Any],
]
"""How a :class:`FakeHost` answers a command: ``(rc, stdout)``, ``(rc, stdout, stderr)``, an
exception (instance or class) to raise, or a callable taking argv and returning one of those."""


def natural_key(text: str) -> tuple[Any, ...]:
    """Sort key that puts ``card2`` before ``card10`` (string order gave "10,2" once)."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text))


StepVisitor = Callable[[str, bool, bool], None]
"""Called by :func:`resolve_under` for each step: (machine path, is a symlink, more follows)."""


def resolve_under(
    root: Union[str, os.PathLike[str]], path: str, visit: Optional[StepVisitor] = None
) -> Optional[str]:
    """Machine path ``path`` with its symlinks resolved as the machine would, inside ``root``.

    ``..`` and absolute link targets never leave ``root``; None after 40 links (a loop).
    ``visit`` sees every component on the way, links included (the snapshot recorder copies
    them as it goes).
    """
    base_dir = os.fspath(root)
    parts = [p for p in path.split("/") if p and p != "."]
    done = "/"
    hops = 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            done = posixpath.dirname(done.rstrip("/")) or "/"
            continue
        candidate = posixpath.join(done, part)
        local = os.path.join(base_dir, candidate.lstrip("/"))
        link = os.path.islink(local)
        if visit is not None:
            visit(candidate, link, bool(parts))
        if link:
            hops += 1
            if hops > 40:
                return None
            target = os.readlink(local)
            base = "/" if target.startswith("/") else done
            parts = [p for p in posixpath.join(base, target).split("/") if p and p != "."] + parts
            done = "/"
            continue
        done = candidate
    return done


class Host:
    """Files under ``root``, an environment, commands and libraries.

    Subclasses provide :attr:`env`, :meth:`run`, :meth:`import_module` and :meth:`probe`; the file
    methods here work for any root. Every file method answers "nothing" (``None``, ``[]``,
    ``False``) instead of raising for missing, unreadable or binary files, because a missing file
    is the normal way a vendor is absent.
    """

    def __init__(self, root: Optional[Union[str, os.PathLike[str]]]) -> None:
        self._root_text: Optional[str] = None if root is None else os.fspath(root)

    @property
    def root(self) -> Optional[Path]:
        """The directory standing for ``/`` (None: no files); paths are kept as text inside, so
        detecting on this machine never imports ``pathlib``."""
        if self._root_text is None:
            return None
        from pathlib import Path

        return Path(self._root_text)

    # -- files -----------------------------------------------------------------------------
    def _local(self, path: str) -> Optional[str]:
        """The local path of machine path ``path`` with symlinks resolved inside the root."""
        if self._root_text is None:
            return None
        if not path.startswith("/"):
            raise ValueError(f"host paths are absolute, got {path!r}")
        resolved = self._resolve(path)
        return None if resolved is None else self._local_text(resolved)

    def _local_text(self, resolved: str) -> str:
        """Where resolved machine path ``resolved`` is under the root."""
        assert self._root_text is not None
        return os.path.join(self._root_text, resolved.lstrip("/"))

    def _resolve(self, path: str) -> Optional[str]:
        """Resolve symlinks of a machine path as the machine would, never leaving the root."""
        assert self._root_text is not None
        return resolve_under(self._root_text, path)

    def realpath(self, path: str) -> Optional[str]:
        """``path`` with every symlink resolved, as a machine path; None when the root is empty."""
        if self._root_text is None:
            return None
        return self._resolve(path)

    def read_text(self, path: str) -> Optional[str]:
        """A regular text file's content; None when missing, unreadable, not a regular file
        (directory, device node, FIFO) or binary."""
        local = self._local(path)
        if local is None:
            return None
        try:
            if not stat.S_ISREG(os.stat(local).st_mode):
                return None  # a device node or FIFO may block for ever; it is never text
            with open(local, "rb") as handle:
                data = handle.read(MAX_READ_BYTES)
        except OSError:
            return None
        if b"\0" in data:
            return None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return None

    def exists(self, path: str) -> bool:
        """Whether ``path`` exists (after symlinks)."""
        local = self._local(path)
        return local is not None and os.path.exists(local)

    def is_dir(self, path: str) -> bool:
        """Whether ``path`` is a directory (after symlinks)."""
        local = self._local(path)
        return local is not None and os.path.isdir(local)

    def listdir(self, path: str) -> list[str]:
        """Entry names of a directory in natural order; ``[]`` when it is missing."""
        local = self._local(path)
        if local is None:
            return []
        try:
            return sorted(os.listdir(local), key=natural_key)
        except OSError:
            return []

    def readlink(self, path: str) -> Optional[str]:
        """The target of symlink ``path`` as written (for driver links), or None."""
        if self._root_text is None:
            return None
        parent = self._resolve(posixpath.dirname(path) or "/")
        if parent is None:
            return None
        local = posixpath.join(self._local_text(parent), posixpath.basename(path))
        try:
            return os.readlink(local)
        except OSError:
            return None

    def glob(self, pattern: str) -> list[str]:
        """Machine paths matching a shell pattern (``*``, ``?``, ``[...]`` per component)."""
        if not pattern.startswith("/"):
            raise ValueError(f"host glob patterns are absolute, got {pattern!r}")
        matches = ["/"]
        for part in (p for p in pattern.split("/") if p):
            following: list[str] = []
            for base in matches:
                if any(ch in part for ch in "*?["):
                    names = [n for n in self.listdir(base) if fnmatch.fnmatchcase(n, part)]
                    following.extend(posixpath.join(base, n) for n in names)
                elif self.exists(posixpath.join(base, part)) or self.readlink(
                    posixpath.join(base, part)
                ):
                    following.append(posixpath.join(base, part))
            matches = following
        return sorted(matches, key=natural_key)

    # -- environment, commands, libraries ---------------------------------------------------
    @property
    def env(self) -> Mapping[str, str]:
        """The environment the node's processes were started with.

        Node detection gives each manager a :meth:`view` of its host that shows only the
        variables the manager declares (``env_vars_read``), which are also all that a snapshot
        records.
        """
        raise NotImplementedError

    def run(self, argv: Sequence[str], timeout: Optional[float] = None) -> CommandResult:
        """Run a program (no shell) and return its result, whatever its exit code.

        Raises ``FileNotFoundError`` when the program is not installed and ``TimeoutError`` when
        it runs past ``timeout`` seconds (default: the command budget, ``ACCELKIT_COMMAND_TIMEOUT``,
        10), or past the running detection's deadline.
        """
        raise NotImplementedError

    def import_module(self, name: str) -> ModuleType:
        """Import a vendor library in this process (for fork-safe, non-blocking ones like NVML)."""
        raise NotImplementedError

    def has_library(self, name: str) -> bool:
        """Whether vendor library ``name`` may be importable, found without importing anything.

        False only when it is certainly absent, so a caller can skip a probe process (about
        80 ms) for a library that is not installed; True when unknown. This base answers True.
        """
        return True

    def probe(
        self,
        function: ProbeFunction,
        *args: Any,
        timeout: Optional[float] = None,
        env: Optional[ProbeEnv] = None,
    ) -> Any:
        """Call ``function(import_module, *args)`` where a hang or crash cannot hurt the caller.

        For libraries that can block or are not fork-safe (dpctl, acl, habana). ``function`` must
        be a module-level function returning plain JSON data. ``env`` changes the probe
        process's environment (see :data:`ProbeEnv`); this process's is never touched. Raises
        ``ImportError`` when the library is not installed, ``TimeoutError`` after ``timeout``
        seconds (default: the probe budget, ``ACCELKIT_PROBE_TIMEOUT``, 20; never past the
        running detection's deadline) and :class:`ProbeError` when the function raises or the
        process dies.
        """
        raise NotImplementedError

    def view(self, env_names: Iterable[str]) -> HostView:
        """This host with its environment narrowed to ``env_names`` (files, commands and
        libraries unchanged): what a manager that declares those variables may look at."""
        return HostView(self, env_names)


class HostView(Host):
    """Another host seen through a narrower environment: only the variables in ``env_names``.

    Node detection hands each manager such a view, limited to the variables the manager
    declares (``env_vars_read``), so a manager cannot depend on a variable a snapshot would not
    record: what it detects here is what a replay of this node detects. Everything else is
    answered by ``inner``.
    """

    def __init__(self, inner: Host, env_names: Iterable[str]) -> None:
        super().__init__(inner._root_text)
        self.inner = inner
        environment = inner.env
        self._env = {name: environment[name] for name in env_names if name in environment}

    @property
    def env(self) -> Mapping[str, str]:
        return self._env

    def realpath(self, path: str) -> Optional[str]:
        return self.inner.realpath(path)

    def read_text(self, path: str) -> Optional[str]:
        return self.inner.read_text(path)

    def exists(self, path: str) -> bool:
        return self.inner.exists(path)

    def is_dir(self, path: str) -> bool:
        return self.inner.is_dir(path)

    def listdir(self, path: str) -> list[str]:
        return self.inner.listdir(path)

    def readlink(self, path: str) -> Optional[str]:
        return self.inner.readlink(path)

    def glob(self, pattern: str) -> list[str]:
        return self.inner.glob(pattern)

    def run(self, argv: Sequence[str], timeout: Optional[float] = None) -> CommandResult:
        return self.inner.run(argv, timeout=timeout)

    def import_module(self, name: str) -> ModuleType:
        return self.inner.import_module(name)

    def has_library(self, name: str) -> bool:
        return self.inner.has_library(name)

    def probe(
        self,
        function: ProbeFunction,
        *args: Any,
        timeout: Optional[float] = None,
        env: Optional[ProbeEnv] = None,
    ) -> Any:
        return self.inner.probe(function, *args, timeout=timeout, env=env)


class LocalHost(Host):
    """The machine this process runs on."""

    def __init__(self, root: Union[str, os.PathLike[str]] = "/") -> None:
        super().__init__(root)

    def _local(self, path: str) -> Optional[str]:
        if self._root_text == "/":
            if not path.startswith("/"):
                raise ValueError(f"host paths are absolute, got {path!r}")
            return path
        return super()._local(path)

    def realpath(self, path: str) -> Optional[str]:
        if self._root_text == "/":
            return os.path.realpath(path)
        return super().realpath(path)

    def readlink(self, path: str) -> Optional[str]:
        if self._root_text == "/":
            try:
                return os.readlink(path)
            except OSError:
                return None
        return super().readlink(path)

    @property
    def env(self) -> Mapping[str, str]:
        return os.environ

    def run(self, argv: Sequence[str], timeout: Optional[float] = None) -> CommandResult:
        argv = list(argv)
        if not argv:
            raise ValueError("run() needs a program")
        if not _on_path(argv[0]):
            raise FileNotFoundError(f"{argv[0]}: not found on PATH")
        import subprocess  # only where a vendor command is installed: most families find none

        limit = deadlines.limit(timeout, "command", os.environ)
        if limit <= 0:
            raise TimeoutError(f"{argv[0]} was not started: the detection's deadline passed")
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            out, err = process.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            raise TimeoutError(f"{argv[0]} did not finish within {limit:g}s") from None
        return CommandResult(
            process.returncode,
            out.decode("utf-8", "replace"),
            err.decode("utf-8", "replace"),
        )

    def import_module(self, name: str) -> ModuleType:
        return importlib.import_module(name)

    def has_library(self, name: str) -> bool:
        """Whether the top-level package of ``name`` is on this process's path (the path a
        probe process gets); a dotted name's parents are never imported to find out."""
        top = name.partition(".")[0]
        try:
            return importlib.util.find_spec(top) is not None
        except (ImportError, ValueError):  # a broken finder or a top with a None __spec__
            return True

    def probe(
        self,
        function: ProbeFunction,
        *args: Any,
        timeout: Optional[float] = None,
        env: Optional[ProbeEnv] = None,
    ) -> Any:
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
        environment = None
        if env:
            environment = {**os.environ, **{k: v for k, v in env.items() if v is not None}}
            for name in (k for k, v in env.items() if v is None):
                environment.pop(name, None)
        process = subprocess.Popen(
            [sys.executable, "-c", _PROBE_MAIN],
            env=environment,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            out, err = process.communicate(request.encode(), timeout=limit)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            raise TimeoutError(
                f"probe {function.__module__}.{function.__qualname__} did not finish within "
                f"{limit:g}s"
            ) from None
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


def _on_path(program: str) -> bool:
    """Whether ``program`` is an executable file, on ``PATH`` unless it names a directory (what
    ``shutil.which`` answers, without importing shutil and the compression modules it brings)."""
    candidates = (
        [program]
        if os.sep in program
        else [os.path.join(d or os.curdir, program) for d in os.get_exec_path()]
    )
    return any(os.path.isfile(c) and os.access(c, os.X_OK) for c in candidates)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """Kill a timed-out child and whatever it started, then reap it.

    A descendant that left the process group (``setsid``) survives the kill and may hold the
    output pipes open for ever: after a short grace period, stop reading them rather than wait.
    """
    import signal
    import subprocess

    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        process.kill()
    try:
        process.communicate(timeout=_REAP_GRACE)
    except subprocess.TimeoutExpired:
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
        process.wait()


_REAP_GRACE = 1.0
"""Seconds to drain a killed child's pipes before giving up on descendants that hold them."""


_PROBE_MAIN = """
import importlib, json, sys
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


class FakeHost(Host):
    """A host made of exactly what it is given, and nothing of the real machine.

    ``root``: a directory standing for ``/`` (None: no files at all). ``env``: the variables.
    ``commands``: keyed by program name (``"nvidia-smi"``) or by an argv prefix tuple
    (``("neuron-ls", "--json-output")``, longest prefix wins), valued as :data:`CommandSpec`.
    ``modules``: importable libraries by name; a value may be an exception to raise on import.
    ``runs`` records every argv run, and ``probe_envs`` the ``env`` of every probe (which runs
    here, in this process, whose environment it leaves alone), for tests that check what was
    asked. The tree under ``root`` is taken as fixed once read: each directory's symlinks are
    resolved once.
    """

    def __init__(
        self,
        root: Optional[Union[str, os.PathLike[str]]] = None,
        env: Optional[Mapping[str, str]] = None,
        commands: Optional[Mapping[Union[str, tuple[str, ...]], CommandSpec]] = None,
        modules: Optional[Mapping[str, Any]] = None,
    ) -> None:
        super().__init__(root)
        self._env = dict(env or {})
        self._commands: dict[tuple[str, ...], CommandSpec] = {}
        for key, spec in (commands or {}).items():
            prefix = (key,) if isinstance(key, str) else tuple(key)
            if not prefix:
                raise ValueError("a FakeHost command key needs at least the program name")
            self._commands[prefix] = spec
        self._modules = dict(modules or {})
        self.runs: list[tuple[str, ...]] = []
        self.probe_envs: list[dict[str, Optional[str]]] = []
        self._resolved: dict[str, Optional[str]] = {}

    def _resolve(self, path: str) -> Optional[str]:
        """As the machine would, each path once and each directory through its own resolution:
        walking every component of every path for symlinks was most of a warm detection."""
        if path in self._resolved:
            return self._resolved[path]
        assert self._root_text is not None
        parent, _, name = path.rstrip("/").rpartition("/")
        if name in ("", ".", "..") or not parent:
            resolved = resolve_under(self._root_text, path)
        else:
            base = self._resolve(parent)
            candidate = None if base is None else posixpath.join(base, name)
            if candidate is not None and os.path.islink(self._local_text(candidate)):
                candidate = resolve_under(self._root_text, candidate)
            resolved = candidate
        self._resolved[path] = resolved
        return resolved

    @property
    def env(self) -> Mapping[str, str]:
        return self._env

    def run(self, argv: Sequence[str], timeout: Optional[float] = None) -> CommandResult:
        argv = tuple(argv)
        if not argv:
            raise ValueError("run() needs a program")
        self.runs.append(argv)
        matches = [p for p in self._commands if argv[: len(p)] == p]
        if not matches:
            raise FileNotFoundError(f"{argv[0]}: not found on PATH")
        spec: Any = self._commands[max(matches, key=len)]
        if callable(spec) and not isinstance(spec, type):
            spec = spec(argv)
        if isinstance(spec, BaseException) or (
            isinstance(spec, type) and issubclass(spec, BaseException)
        ):
            raise spec
        if isinstance(spec, CommandResult):
            return spec
        if isinstance(spec, tuple) and len(spec) in (2, 3):
            return CommandResult(*spec)
        raise TypeError(f"FakeHost command {argv!r}: cannot answer with {spec!r}")

    def import_module(self, name: str) -> ModuleType:
        if name not in self._modules:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        module = self._modules[name]
        if isinstance(module, BaseException) or (
            isinstance(module, type) and issubclass(module, BaseException)
        ):
            raise module
        return module  # type: ignore[no-any-return]

    def has_library(self, name: str) -> bool:
        """Whether ``name`` is among the given ``modules`` (a FakeHost has nothing else)."""
        return name in self._modules

    def probe(
        self,
        function: ProbeFunction,
        *args: Any,
        timeout: Optional[float] = None,
        env: Optional[ProbeEnv] = None,
    ) -> Any:
        """As :meth:`LocalHost.probe`: ``ImportError`` only when importing a library fails (one
        raised inside a library call is a :class:`ProbeError`, as in a real probe process).
        ``env`` is recorded in :attr:`probe_envs`; this process's environment is left alone."""
        self.probe_envs.append(dict(env or {}))

        def load(name: str) -> ModuleType:
            try:
                return self.import_module(name)
            except ImportError as exc:
                raise _LibraryMissing(exc) from exc

        try:
            return function(load, *args)
        except _LibraryMissing as missing:
            raise missing.error from None
        except TimeoutError:
            raise
        except (Exception, SystemExit) as exc:
            raise ProbeError(f"{type(exc).__name__}: {exc}") from exc


class _LibraryMissing(Exception):
    """A probe's import of its library failed (carried past the probe function's own code)."""

    def __init__(self, error: ImportError) -> None:
        super().__init__(str(error))
        self.error = error
