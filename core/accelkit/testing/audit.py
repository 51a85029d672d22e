"""Proof that detection touches the machine only through its ``Host``, via ``sys.addaudithook``.

While an :class:`Audit` is active, the interpreter's audit events are inspected, and any of these
is recorded as a violation *and blocked* (so a misbehaving plugin cannot, say, reach a metadata
server while under test):

- opening a file or listing a directory outside the host's root, except what Python's own import
  system reads (modules, bytecode, package directories); ``/sys``, ``/proc``, ``/dev``, ``/etc``
  and ``/run`` are never allowed outside the root;
- starting a process (``subprocess``, ``os.system``, ``os.exec*``, ``os.posix_spawn``, fork)
  instead of ``host.run``, or loading a shared library with ``ctypes``;
- importing a vendor library instead of ``host.import_module``;
- any network use (connect, bind, name lookups, sendto);
- changing the environment or the working directory.

Audit hooks cannot be removed, so one hook is installed on first use and does nothing unless an
audit is active. Events from every thread count while one is: a thread started by ``detect()``
must not escape the audit.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import os
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Optional

from ..host import Host

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
"""Top-level modules a manager must reach through ``host.import_module``, never ``import``."""

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
        "ctypes.dlopen",
    }
)
_NETWORK_EVENTS = frozenset(
    {
        "socket.connect",
        "socket.bind",
        "socket.getaddrinfo",
        "socket.gethostbyname",
        "socket.gethostbyaddr",
        "socket.getnameinfo",
        "socket.sendto",
        "socket.sendmsg",
    }
)
_ENVIRONMENT_EVENTS = frozenset({"os.putenv", "os.unsetenv", "os.chdir"})
_FILE_EVENTS = frozenset({"open", "os.listdir", "os.scandir", "glob.glob"})
_IMPORT_SUFFIXES = (*importlib.machinery.all_suffixes(), ".pyc", ".pth")

KINDS = ("file", "process", "library", "network", "environment")


@dataclass(frozen=True)
class Violation:
    """One forbidden access: its kind (one of :data:`KINDS`), the audit event and its target."""

    kind: str
    event: str
    target: str

    def __str__(self) -> str:
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
            if path is None or self._file_allowed(event, path):
                return None
            return Violation("file", event, path)
        if event in _PROCESS_EVENTS:
            return Violation("process", event, _shown(args))
        if event in _NETWORK_EVENTS:
            return Violation("network", event, _shown(args))
        if event in _ENVIRONMENT_EVENTS:
            return Violation("environment", event, _shown(args[:1]))
        if (
            event == "import"
            and args
            and isinstance(args[0], str)
            and args[0].partition(".")[0] in VENDOR_LIBRARIES
        ):
            return Violation("library", "import", args[0])
        return None

    def _file_allowed(self, event: str, path: str) -> bool:
        real = os.path.realpath(path)
        if self.root is not None and _under(real, self.root):
            return True
        if any(_under(real, machine) for machine in MACHINE_DIRS):
            return False
        if event == "open" and _is_import_artifact(real):
            return True
        return any(_under(real, base) for base in self.import_roots)


def _under(path: str, base: str) -> bool:
    return path == base or path.startswith(base.rstrip(os.sep) + os.sep)


def _is_import_artifact(path: str) -> bool:
    """Modules, bytecode (and its atomic temporary names) and ``.pth`` files."""
    name = os.path.basename(path)
    return name.endswith(_IMPORT_SUFFIXES) or ".pyc." in name


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
    """Directories Python's import system may read: sys.path, package dirs, the prefixes."""
    candidates = [*sys.path, sys.prefix, sys.base_prefix, sys.exec_prefix]
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
    message = f"accelkit conformance audit: {violation} is not allowed during detect()"
    if violation.kind == "library":
        raise ForbiddenImport(message)
    raise Forbidden(message)


@contextlib.contextmanager
def watching(host: Host) -> Iterator[Audit]:
    """Audit everything the process does inside the block against ``host``'s root.

    Meant for hosts that answer in-process (``FakeHost``, snapshots): a ``LocalHost`` runs its
    commands and probes as processes, which the audit would rightly report.
    """
    global _active, _installed
    root = os.path.realpath(host.root) if host.root is not None else None
    audit = Audit(root=root, import_roots=_import_roots())
    with _lock:
        if _active is not None:
            raise RuntimeError("accelkit audits do not nest")
        if not _installed:
            sys.addaudithook(_hook)
            _installed = True
        _active = audit
    try:
        yield audit
    finally:
        _active = None
