"""Proof that detection touches the machine only through its ``Host``, via ``sys.addaudithook``.

While an :class:`Audit` is active, the interpreter's audit events are inspected, and any of these
is recorded as a violation *and blocked* (so a misbehaving plugin cannot, say, reach a metadata
server while under test):

- opening, listing or testing a path (``open``, ``os.listdir``, ``os.scandir``, ``glob``, and
  ``os.stat``, ``os.lstat``, ``os.access`` and ``os.readlink``, which have no audit event and so
  are wrapped while an audit is active: ``os.path.exists("/dev/acme0")`` and ``shutil.which`` are
  caught too) outside the host's root, except what importlib reads (modules, bytecode, the
  directories it lists, and ``sys.path`` entries and package directories, for data files);
  ``/sys``, ``/proc``, ``/dev``, ``/etc`` and ``/run`` are never allowed outside the root;
- changing any file (writing, creating, removing, renaming, ``chmod``...), inside the root too,
  except the bytecode the import system caches;
- starting a process (``subprocess``, ``os.system``, ``os.exec*``, ``os.posix_spawn``, fork,
  ``multiprocessing``), signalling one, or loading a shared library with ``ctypes``, instead of
  ``host.run``;
- importing a vendor library (:data:`VENDOR_LIBRARIES`, and the plugin's own ones given to
  :func:`watching`) instead of ``host.import_module``, by an ``import`` statement or
  ``importlib.import_module``, even when it is already imported (it is hidden from
  ``sys.modules`` while the audit is active);
- any network use: creating a socket, connecting, binding, name lookups, sending;
- changing the environment or the working directory.

Reading ``os.environ`` (or ``os.getenv``) is *recorded but not blocked*, as kind "environment":
a manager reads variables through ``host.env``, which a snapshot records and a ``FakeHost`` fakes.

Audit hooks cannot be removed, so one hook is installed on first use and does nothing unless an
audit is active. Events from every thread count while one is: a thread started by ``detect()``
must not escape the audit. What no audit can see: C extensions calling the OS directly, and
``posix.environ``.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import os
import pathlib
import sys
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from types import FrameType, ModuleType
from typing import Any, Callable, Optional

from accelkit.host import Host

__all__ = [
    "KINDS",
    "MACHINE_DIRS",
    "VENDOR_LIBRARIES",
    "Audit",
    "Forbidden",
    "ForbiddenImport",
    "Violation",
    "watching",
]

VENDOR_LIBRARIES = frozenset(
    {
        "pynvml",
        "amdsmi",
        "pyrsmi",
        "dpctl",
        "acl",
        "habana_frameworks",
        "hlml",
        "libtpu",
        "torch",
        "torch_xla",
        "torch_neuronx",
        "torch_npu",
        "jax",
        "jaxlib",
        "tensorflow",
        "cupy",
        "numba",
    }
)
"""Top-level modules a manager must reach through ``host.import_module``, never ``import``: the
built-in families' libraries and the frameworks; a plugin adds its vendor's own."""

MACHINE_DIRS = ("/sys", "/proc", "/dev", "/etc", "/run")
"""Where machine facts live: never read outside the host's root, import roots or not."""

_PROCESS_EVENTS = frozenset(
    {
        "subprocess.Popen",
        "os.system",
        "os.exec",
        "os.posix_spawn",
        "os.spawn",
        "os.fork",
        "os.forkpty",
        "os.startfile",
        "os.kill",
        "os.killpg",
        "_posixsubprocess.fork_exec",
        "signal.pthread_kill",
        "ctypes.dlopen",
    }
)
_NETWORK_EVENTS = frozenset(
    {
        "socket.__new__",
        "socket.connect",
        "socket.bind",
        "socket.getaddrinfo",
        "socket.gethostbyname",
        "socket.gethostbyaddr",
        "socket.getnameinfo",
        "socket.sendto",
        "socket.sendmsg",
        "socket.getservbyname",
        "socket.getservbyport",
    }
)
_ENVIRONMENT_EVENTS = frozenset({"os.putenv", "os.unsetenv", "os.chdir"})
_FILE_EVENTS = frozenset(
    {
        "open",
        "os.listdir",
        "os.scandir",
        "glob.glob",
        "os.getxattr",
        "os.listxattr",
        # no audit events of their own: raised by the wrappers installed during an audit
        "os.stat",
        "os.lstat",
        "os.access",
        "os.readlink",
    }
)
_CHANGE_EVENTS = frozenset(
    {
        "os.mkdir",
        "os.remove",
        "os.rename",
        "os.rmdir",
        "os.symlink",
        "os.link",
        "os.chmod",
        "os.chown",
        "os.chflags",
        "os.lchflags",
        "os.truncate",
        "os.utime",
        "os.setxattr",
        "os.removexattr",
        "shutil.rmtree",
        "shutil.move",
        "shutil.copyfile",
        "shutil.copymode",
        "shutil.copystat",
        "shutil.copytree",
        "shutil.chown",
        "shutil.make_archive",
        "shutil.unpack_archive",
        "tempfile.mkstemp",
        "tempfile.mkdtemp",
    }
)
"""Events that change the file system: never allowed, except the import system's bytecode."""
_ENVIRON_READ = "os.environ"
"""Raised by the ``os.environ`` watcher installed during an audit: recorded, not blocked."""
_WRAPPED = ("stat", "lstat", "access", "readlink")
"""``os`` functions with no audit event of their own, wrapped while an audit is active."""
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_IMPORT_SUFFIXES = (*importlib.machinery.all_suffixes(), ".pyc", ".pth")

KINDS = ("file", "process", "library", "network", "environment")


@dataclass(frozen=True)
class Violation:
    """One forbidden access: its kind (one of :data:`KINDS`), the audit event and its target."""

    kind: str
    event: str
    target: str

    @property
    def blocked(self) -> bool:
        """Whether the access was refused (everything but reading ``os.environ``)."""
        return self.event != _ENVIRON_READ

    def __str__(self) -> str:
        if self.event == _ENVIRON_READ:
            return f"os.environ[{self.target}]"
        return f"{self.event}({self.target})"


class Forbidden(PermissionError):
    """Raised into the plugin in place of a forbidden file, process, network or env access."""


class ForbiddenImport(ImportError):
    """Raised into the plugin in place of a direct import of a vendor library."""


@dataclass
class Audit:
    """What one detection touched that it should not have."""

    root: Optional[str]
    import_roots: tuple[str, ...]
    libraries: frozenset[str] = VENDOR_LIBRARIES
    events: list[Violation] = field(default_factory=list)

    def of_kind(self, *kinds: str) -> list[Violation]:
        """The violations of the given kinds, in the order they happened, without repeats."""
        seen: list[Violation] = []
        for violation in self.events:
            if violation.kind in kinds and violation not in seen:
                seen.append(violation)
        return seen

    def summary(self, *kinds: str, limit: int = 5) -> str:
        """A sentence listing the violations (of ``kinds``, or all), for failure messages."""
        found = self.of_kind(*(kinds or KINDS))
        shown = ", ".join(str(v) for v in found[:limit])
        more = f" and {len(found) - limit} more" if len(found) > limit else ""
        return shown + more

    def classify(self, event: str, args: tuple[Any, ...]) -> Optional[Violation]:
        """The violation this event is, or None when it is allowed."""
        if event in _FILE_EVENTS:
            path = _path_of(args[0] if args else None)
            if event == "open" and _writes(args):
                if path is None or _is_bytecode_cache(path):
                    return None
                return Violation("file", "open for writing", path)
            if path is None or self._file_allowed(event, path):
                return None
            return Violation("file", event, path)
        if event in _CHANGE_EVENTS:
            paths = [p for p in map(_path_of, args[:2]) if p is not None]
            if paths and all(_is_bytecode_cache(p) for p in paths):
                return None
            return Violation("file", event, ", ".join(paths) or _shown(args))
        if event == _ENVIRON_READ:
            return Violation("environment", event, _shown(args[:1]))
        if event in _PROCESS_EVENTS:
            return Violation("process", event, _shown(args))
        if event in _NETWORK_EVENTS:
            shown = args[1:3] if event == "socket.__new__" else args  # (socket, family, type)
            return Violation("network", event, _shown(shown))
        if event in _ENVIRONMENT_EVENTS:
            return Violation("environment", event, _shown(args[:1]))
        if event == "import" and args and isinstance(args[0], str) and self.is_library(args[0]):
            return Violation("library", "import", args[0])
        return None

    def is_library(self, module: str) -> bool:
        """Whether ``module`` belongs to a vendor library this audit blocks importing."""
        return module.partition(".")[0] in self.libraries

    def _file_allowed(self, event: str, path: str) -> bool:
        real = os.path.realpath(path)
        if self.root is not None and _under(real, self.root):
            return True
        if any(_under(real, machine) for machine in MACHINE_DIRS):
            return False
        if event in ("open", "os.stat", "os.lstat") and _is_import_artifact(real):
            return True
        return any(_under(real, base) for base in self.import_roots) or _by_import_system()


def _under(path: str, base: str) -> bool:
    return path == base or path.startswith(base.rstrip(os.sep) + os.sep)


_IMPORT_SYSTEM = frozenset({"importlib._bootstrap", "importlib._bootstrap_external", "zipimport"})
"""The modules of Python's import system, whose own reads an audit allows outside machine dirs."""


def _by_import_system() -> bool:
    """Whether the first caller outside this module is importlib: a finder listing a directory
    no import root holds yet (a package first imported in the audit, mapped outside ``sys.path``
    by an editable install) would, blocked, cache it as empty for the rest of the process."""
    frame: Optional[FrameType] = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__") == __name__:
        frame = frame.f_back
    return frame is not None and frame.f_globals.get("__name__") in _IMPORT_SYSTEM


def _is_import_artifact(path: str) -> bool:
    """Modules, bytecode (and its atomic temporary names) and ``.pth`` files."""
    name = os.path.basename(path)
    return name.endswith(_IMPORT_SUFFIXES) or ".pyc." in name


def _is_bytecode_cache(path: str) -> bool:
    """A ``__pycache__`` directory or a bytecode file (or its temporary name) inside one, or
    anything under ``sys.pycache_prefix`` (``PYTHONPYCACHEPREFIX``) when one is set."""
    prefix = getattr(sys, "pycache_prefix", None)
    if prefix and _under(os.path.realpath(path), os.path.realpath(prefix)):
        return True
    parent, name = os.path.split(path)
    if name == "__pycache__":
        return True
    return os.path.basename(parent) == "__pycache__" and (name.endswith(".pyc") or ".pyc." in name)


def _writes(args: tuple[Any, ...]) -> bool:
    """Whether an ``open`` event (path, mode, flags) opens for writing."""
    mode = args[1] if len(args) > 1 else None
    flags = args[2] if len(args) > 2 else 0
    if isinstance(mode, str) and any(ch in mode for ch in "wax+"):
        return True
    return isinstance(flags, int) and bool(flags & _WRITE_FLAGS)


def _path_of(value: Any) -> Optional[str]:
    """The path an event names, or None for file descriptors and the current directory."""
    if value is None or isinstance(value, int):
        return None
    try:
        path = os.fsdecode(value)
    except TypeError:
        return None
    return os.path.abspath(path) if path else None


def _shown(args: tuple[Any, ...]) -> str:
    text = ", ".join(os.fsdecode(a) if isinstance(a, bytes) else repr(a) for a in args[:2])
    return text if len(text) <= 120 else text[:117] + "..."


def _import_roots() -> tuple[str, ...]:
    """Directories Python's import system may read: ``sys.path`` and package directories.

    Not the interpreter's prefixes: a system Python's is ``/usr``, which holds vendor tools and
    libraries (``/usr/bin/nvidia-smi``), and its standard library is on ``sys.path`` anyway.
    """
    candidates: list[Any] = list(sys.path)
    for module in list(sys.modules.values()):
        candidates.extend(getattr(module, "__path__", None) or ())
    roots = set()
    for candidate in candidates:
        if not isinstance(candidate, str):
            continue
        real = os.path.realpath(candidate or os.curdir)
        if real != os.sep and not any(_under(real, m) for m in MACHINE_DIRS):
            roots.add(real)
    return tuple(sorted(roots))


_active: Optional[Audit] = None
_lock = threading.Lock()
_inside = threading.local()
_installed = False


def _hook(event: str, args: tuple[Any, ...]) -> None:
    audit = _active
    if audit is None or getattr(_inside, "busy", False):
        return
    _inside.busy = True
    try:
        violation = audit.classify(event, args)
    except Exception:  # the hook must never break the interpreter on its own account
        violation = None
    finally:
        _inside.busy = False
    if violation is None:
        return
    audit.events.append(violation)
    if not violation.blocked:
        return
    message = f"accelkit conformance audit: {violation} is not allowed during detect()"
    if violation.kind == "library":
        raise ForbiddenImport(message, name=violation.target)
    raise Forbidden(message)


def _audited(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """``os.<name>`` that reports itself to the audit hook first (it has no audit event)."""

    def audited(path: Any, *args: Any, **kwargs: Any) -> Any:
        _hook(f"os.{name}", (path,))
        return function(path, *args, **kwargs)

    audited.__name__ = audited.__qualname__ = name
    audited.__doc__ = function.__doc__
    return audited


class _WatchedEnvironData(dict):  # type: ignore[type-arg]
    """Stands in for ``os.environ._data`` during an audit: every lookup is reported."""

    def __getitem__(self, key: Any) -> Any:
        _hook(_ENVIRON_READ, (os.fsdecode(key) if isinstance(key, bytes) else key,))
        return super().__getitem__(key)


class _VendorImportBlocker(importlib.abc.MetaPathFinder):
    """First on ``sys.meta_path`` during an audit: ``importlib.import_module`` of a vendor
    library raises no ``import`` audit event, so it is stopped here."""

    def find_spec(
        self, fullname: str, path: Optional[Sequence[str]], target: Optional[ModuleType] = None
    ) -> None:
        audit = _active
        if audit is not None and audit.is_library(fullname):
            _hook("import", (fullname,))
        return None


_BLOCKER = _VendorImportBlocker()


def _audited_fork_exec(function: Callable[..., Any]) -> Callable[..., Any]:
    """``_posixsubprocess.fork_exec`` reporting itself first: ``multiprocessing``'s spawn start
    method starts its process with it directly, without the ``subprocess.Popen`` event."""

    def fork_exec(*args: Any, **kwargs: Any) -> Any:
        _hook("_posixsubprocess.fork_exec", args[:1])
        return function(*args, **kwargs)

    return fork_exec


@contextlib.contextmanager
def _instrumented(audit: Audit) -> Iterator[None]:
    """While the block runs: the ``os`` and ``fork_exec`` wrappers, the environment watcher, the
    import blocker, and vendor libraries hidden from ``sys.modules`` (so importing them again is
    seen)."""
    posix_subprocess: Any = None
    with contextlib.suppress(ImportError):  # POSIX only
        posix_subprocess = importlib.import_module("_posixsubprocess")
    fork_exec = getattr(posix_subprocess, "fork_exec", None)
    originals = {name: getattr(os, name) for name in _WRAPPED}
    environ: Any = os.environ
    data = environ._data
    hidden = {name: module for name, module in list(sys.modules.items()) if audit.is_library(name)}
    for name in hidden:
        del sys.modules[name]
    wrapped = {name: _audited(name, function) for name, function in originals.items()}
    for name, function in wrapped.items():
        setattr(os, name, function)
    # Python < 3.11: pathlib's accessor bound os.stat (and others) when it was defined
    accessor: Any = getattr(pathlib, "_NormalAccessor", None)
    bound = {
        name: function
        for name, function in originals.items()
        if accessor is not None and accessor.__dict__.get(name) is function
    }
    for name in bound:
        setattr(accessor, name, staticmethod(wrapped[name]))
    environ._data = _WatchedEnvironData(data)
    sys.meta_path.insert(0, _BLOCKER)
    if fork_exec is not None:
        posix_subprocess.fork_exec = _audited_fork_exec(fork_exec)
    try:
        yield
    finally:
        if fork_exec is not None:
            posix_subprocess.fork_exec = fork_exec
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(_BLOCKER)
        environ._data = data
        for name, function in bound.items():
            setattr(accessor, name, function)
        for name, function in originals.items():
            setattr(os, name, function)
        sys.modules.update(hidden)


@contextlib.contextmanager
def watching(host: Host, libraries: Iterable[str] = ()) -> Iterator[Audit]:
    """Audit everything the process does inside the block against ``host``'s root.

    ``libraries`` are top-level modules of the plugin's own vendor, blocked as the built-in
    :data:`VENDOR_LIBRARIES` are: a plugin for a vendor accelkit does not know names its own.

    Meant for hosts that answer in-process (``FakeHost``, snapshots): a ``LocalHost`` runs its
    commands and probes as processes, which the audit would rightly report.
    """
    global _active, _installed
    root = os.path.realpath(host.root) if host.root is not None else None
    audit = Audit(
        root=root, import_roots=_import_roots(), libraries=VENDOR_LIBRARIES.union(libraries)
    )
    with _lock:
        if _active is not None:
            raise RuntimeError("accelkit audits do not nest")
        if not _installed:
            sys.addaudithook(_hook)
            _installed = True
        _active = audit
    try:
        with _instrumented(audit):
            yield audit
    finally:
        _active = None
