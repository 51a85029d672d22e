"""``Host``: everything a manager may look at, and the only way it looks.

A manager never opens a file, reads a variable, runs a program or imports a vendor library
except through the ``Host`` it is given. That single seam is what lets every plugin be tested
without hardware (:class:`~accelkit.host.FakeHost`), lets a node be recorded and replayed
(snapshots), and lets the conformance kit prove that detection touches nothing else.

This module holds what every host shares: the contract, the file methods that work for any root
(so the real machine, a fake and a replay read files alike), and :class:`HostView`, the narrowed
environment node detection hands each manager. The machine itself is :mod:`accelkit.host._local`.

Paths are always written as they are on the machine (``/sys/class/drm``); a host maps them under
its ``root``.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
import stat
from collections.abc import Iterable, Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Optional, Union

if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "MAX_READ_BYTES",
    "CommandResult",
    "Host",
    "HostView",
    "ProbeEnv",
    "ProbeFunction",
    "natural_key",
    "resolve_under",
    "run_on",
]

MAX_READ_BYTES = 1 << 20
"""Larger files are not device facts; reading stops there."""


class CommandResult(NamedTuple):
    """What a command returned: exit code and decoded output."""

    returncode: int
    stdout: str
    stderr: str = ""


ProbeFunction = Callable[..., Any]
"""A module-level function ``f(import_module, *args)`` whose result is plain JSON data."""

ProbeEnv = Mapping[str, Optional[str]]
"""Variables a probe's or a command's process runs with, on top of this process's (None:
removed): a library that reads its variables when first used (Level Zero's device order) sees
them from the start, and a tool that honours the family's visibility variable (tt-smi) can be
asked with it lifted."""


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
        return sorted(self._names(path), key=natural_key)

    def _names(self, path: str) -> list[str]:
        """Entry names of a directory in the file system's order; ``[]`` when it is missing."""
        local = self._local(path)
        if local is None:
            return []
        try:
            return os.listdir(local)
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
        """Machine paths matching a shell pattern (``*``, ``?``, ``[...]`` per component), in
        natural order. Only the matches are sorted: ``/dev`` on a server holds thousands of
        entries (terminals, loop devices, disks), and sorting each ``/dev/accel*`` look-up's
        listing by :func:`natural_key` cost milliseconds."""
        if not pattern.startswith("/"):
            raise ValueError(f"host glob patterns are absolute, got {pattern!r}")
        matches = ["/"]
        for part in (p for p in pattern.split("/") if p):
            if any(ch in part for ch in "*?["):
                matches_part = re.compile(fnmatch.translate(part)).match  # as fnmatchcase does
                matches = [
                    posixpath.join(base, name)
                    for base in matches
                    for name in self._names(base)
                    if matches_part(name)
                ]
            else:  # a dangling link is listed, as the machine's glob lists it
                paths = (posixpath.join(base, part) for base in matches)
                matches = [path for path in paths if self.exists(path) or self.readlink(path)]
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

    def run(
        self,
        argv: Sequence[str],
        timeout: Optional[float] = None,
        env: Optional[ProbeEnv] = None,
    ) -> CommandResult:
        """Run a program (no shell) and return its result, whatever its exit code.

        ``env`` changes the program's environment (see :data:`ProbeEnv`); this process's is never
        touched. Raises ``FileNotFoundError`` when the program is not installed and
        ``TimeoutError`` when it runs past ``timeout`` seconds (default: the command budget,
        ``ACCELKIT_COMMAND_TIMEOUT``, 10), or past the running detection's deadline.
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
        running detection's deadline) and :class:`~accelkit.ProbeError` when the function raises
        or the process dies.
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

    def run(
        self,
        argv: Sequence[str],
        timeout: Optional[float] = None,
        env: Optional[ProbeEnv] = None,
    ) -> CommandResult:
        return run_on(self.inner, argv, timeout, env)

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


def run_on(
    host: Host, argv: Sequence[str], timeout: Optional[float], env: Optional[ProbeEnv]
) -> CommandResult:
    """``host.run(argv, ...)``, passing ``env`` only when it changes something and ``host`` takes
    it: a Host subclass written before ``run`` took ``env`` (a plugin's, a scheduler's) is still
    run, and wrapped, as it was, the command then seeing this process's environment."""
    if env and _takes_env(host):
        return host.run(argv, timeout=timeout, env=env)
    return host.run(argv, timeout=timeout)


def _takes_env(host: Host) -> bool:
    """Whether ``host.run`` takes ``env`` (a parameter of that name, or ``**kwargs``)."""
    import inspect

    parameters = inspect.signature(host.run).parameters.values()
    return any(p.name == "env" or p.kind is p.VAR_KEYWORD for p in parameters)
