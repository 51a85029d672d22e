"""The ledger's file: where it lives, its JSON layout, the lock, and the atomic replace.

Every change happens under an exclusive ``fcntl.flock`` on a lock file beside the ledger (the
ledger itself cannot carry the lock: each change replaces it with a new file), and is written to
a temporary file that ``os.replace`` then moves over the ledger, so a reader sees the old state
or the new one, never half of one, whenever a writer is killed. The lock is the kernel's: it
goes with its process, so a holder killed while deciding blocks nobody.

Layout (``"version": 1``)::

    {"version": 1, "boot": "<boot id>", "node": {"fingerprint": "...", "summary": "GPU=8"},
     "next_ticket": 3,
     "grants": [{"grant": <Grant.to_dict()>, "holder": {"pid": 41, "start": 9912}, "since": T}],
     "queue": [{"ticket": 2, "holder": {...}, "wants": "GPU=1", "since": T}]}

A file that does not read as this layout is reported, naming the file and what to do; it is never
reset silently, since a reset would hand out devices that running processes hold.
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from accelkit._json import check_keys
from accelkit.errors import LedgerError
from accelkit.ledger._holder import Holder, boot_id

__all__ = [
    "LEDGER_VAR",
    "VERSION",
    "LedgerFile",
    "LedgerState",
    "Record",
    "Ticket",
    "default_path",
]

VERSION = 1
"""The layout this accelkit reads and writes; any other is refused with a message."""

LEDGER_VAR = "ACCELKIT_LEDGER"
"""A ledger path every accelkit on this node uses instead of the per-user default (a group's)."""

_KEYS = ("version", "boot", "node", "next_ticket", "grants", "queue")
_RECORD_KEYS = ("grant", "holder", "since")
_TICKET_KEYS = ("ticket", "holder", "wants", "since")


@dataclass
class Record:
    """A live grant: its ``Grant.to_dict()``, its holder, and since when (epoch seconds)."""

    grant: dict[str, Any]
    holder: Holder
    since: float

    @property
    def token(self) -> int:
        token: int = self.grant["token"]
        return token

    def to_dict(self) -> dict[str, Any]:
        return {"grant": self.grant, "holder": self.holder.to_dict(), "since": self.since}


@dataclass
class Ticket:
    """A request waiting its turn: arrival number, holder, what it wants (text), since when."""

    ticket: int
    holder: Holder
    wants: str
    since: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "ticket": self.ticket,
            "holder": self.holder.to_dict(),
            "wants": self.wants,
            "since": self.since,
        }


@dataclass
class LedgerState:
    """The ledger's content while the lock is held; ``changed`` makes the writer save it."""

    boot: str
    node: Optional[dict[str, str]] = None
    next_ticket: int = 1
    grants: list[Record] = field(default_factory=list)
    queue: list[Ticket] = field(default_factory=list)
    changed: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": VERSION,
            "boot": self.boot,
            "node": self.node,
            "next_ticket": self.next_ticket,
            "grants": [r.to_dict() for r in self.grants],
            "queue": [t.to_dict() for t in self.queue],
        }


def default_path() -> tuple[Path, bool]:
    """The ledger ``path=None`` means, and whether it is the per-user one: ``$ACCELKIT_LEDGER``
    (a group's, used as given), else ``$XDG_RUNTIME_DIR/accelkit/ledger.json``, else
    ``<temp dir>/accelkit-<uid>/ledger.json``. The pool and ``accelkit run`` share it."""
    chosen = os.environ.get(LEDGER_VAR, "").strip()
    if chosen:
        return Path(chosen), False
    runtime = os.environ.get("XDG_RUNTIME_DIR", "").strip()
    if runtime and os.path.isdir(runtime):
        return Path(runtime) / "accelkit" / "ledger.json", True
    return Path(tempfile.gettempdir()) / f"accelkit-{os.getuid()}" / "ledger.json", True


class LedgerFile:
    """One ledger file: read it, change it under the lock, replace it atomically.

    Thread-safe: threads of one process take turns (a lock per object), processes take turns on
    the file lock, which is opened again after a fork (a child must never share its parent's).
    """

    def __init__(self, path: Path, *, private_parent: bool = False) -> None:
        """``private_parent``: the per-user default, whose directory is made (mode 0700) and
        must belong to this user; any other ledger's directory must exist."""
        self.path = path
        self.lock_path = path.with_name(path.name + ".lock")
        self._temp_path = path.with_name(path.name + ".tmp")
        self._private_parent = private_parent
        self._threads = threading.Lock()
        self._fd: Optional[int] = None
        self._fd_pid = 0
        self._mode = 0o600

    @contextmanager
    def locked(self) -> Iterator[LedgerState]:
        """The current state, under the exclusive lock; saved on exit if ``changed`` is set."""
        with self._threads:
            fd = self._lock_fd()
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                state = self._read()
                yield state
                if state.changed:
                    self._write(state)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)

    # -- the lock ----------------------------------------------------------------------------
    def _lock_fd(self) -> int:
        if self._fd is not None and self._fd_pid == os.getpid():
            return self._fd
        directory = self.path.parent
        if self._private_parent:
            _private_directory(directory)
        elif not directory.is_dir():
            raise LedgerError(
                f"cannot use the ledger {self.path}: its directory {directory} does not exist. "
                f"Create it (for a group: mkdir -m 2770 {directory}; chgrp GROUP {directory})"
            )
        # The ledger and its lock take the directory's read and write bits, whatever the
        # umask: private in a private directory, group-writable in a group's.
        self._mode = stat.S_IMODE(directory.stat().st_mode) & 0o666
        try:
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, self._mode)
        except PermissionError:
            try:
                fd = os.open(self.lock_path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError as error:
                raise self._unwritable(error) from None
        except OSError as error:
            raise self._unwritable(error) from None
        if os.fstat(fd).st_uid == os.getuid():
            with suppress(OSError):
                os.fchmod(fd, self._mode)  # whatever this process's umask says
        self._fd, self._fd_pid = fd, os.getpid()
        return fd

    # -- reading -----------------------------------------------------------------------------
    def _read(self) -> LedgerState:
        try:
            with open(self.path, "rb") as file:
                raw = file.read()
        except FileNotFoundError:
            return LedgerState(boot=boot_id())
        except OSError as error:
            raise LedgerError(f"cannot read the ledger {self.path}: {error.strerror}") from None
        try:
            return self._parse(json.loads(raw))
        except ValueError as error:
            raise self.corrupt(str(error)) from None

    def _parse(self, data: Any) -> LedgerState:
        if isinstance(data, dict) and data.get("version") != VERSION:
            raise self._foreign(data.get("version"))
        data = check_keys(data, _KEYS, "the ledger", required=_KEYS)
        node = data["node"]
        if node is not None and not (
            isinstance(node, dict) and all(isinstance(v, str) for v in node.values())
        ):
            raise ValueError(f"its node is {{'fingerprint': ..., 'summary': ...}}, not {node!r}")
        next_ticket = data["next_ticket"]
        if not isinstance(next_ticket, int) or isinstance(next_ticket, bool):
            raise ValueError(f"next_ticket is {next_ticket!r}, not a whole number")
        state = LedgerState(boot=str(data["boot"]), node=node, next_ticket=next_ticket)
        for entry in _list(data["grants"], "grants"):
            entry = check_keys(entry, _RECORD_KEYS, "a ledger grant", required=_RECORD_KEYS)
            grant = entry["grant"]
            if not isinstance(grant, dict) or not isinstance(grant.get("token"), int):
                raise ValueError(f"a recorded grant is {entry['grant']!r:.80}")
            state.grants.append(
                Record(entry["grant"], Holder.from_dict(entry["holder"]), _time(entry["since"]))
            )
        for entry in _list(data["queue"], "queue"):
            entry = check_keys(entry, _TICKET_KEYS, "a ledger ticket", required=_TICKET_KEYS)
            number = entry["ticket"]
            if not isinstance(number, int) or isinstance(number, bool):
                raise ValueError(f"a ticket number is {number!r}")
            holder = Holder.from_dict(entry["holder"])
            state.queue.append(Ticket(number, holder, str(entry["wants"]), _time(entry["since"])))
        return state

    # -- writing -----------------------------------------------------------------------------
    def _write(self, state: LedgerState) -> None:
        text = json.dumps(state.to_dict(), separators=(",", ":")).encode()
        try:
            with suppress(FileNotFoundError):
                os.unlink(self._temp_path)  # left by a writer killed mid-write
            fd = os.open(
                self._temp_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, self._mode
            )
            try:
                os.fchmod(fd, self._mode)  # whatever this process's umask says
                os.write(fd, text)
            finally:
                os.close(fd)
            os.replace(self._temp_path, self.path)
        except OSError as error:
            raise self._unwritable(error) from None

    # -- errors for people -------------------------------------------------------------------
    def _unwritable(self, error: OSError) -> LedgerError:
        directory = self.path.parent
        return LedgerError(
            f"cannot write the ledger {self.path} ({error.strerror}): every process that shares "
            f"it needs read and write permission on {directory}, where the ledger is replaced "
            f"on each change and {self.lock_path.name} is locked. Fix the permissions of "
            f"{directory}, or give a ledger in a directory you can write (--ledger PATH, "
            f"path=..., or {LEDGER_VAR})"
        )

    def corrupt(self, why: str) -> LedgerError:
        """The error for a ledger that does not read as a ledger: what to do, never a reset."""
        return LedgerError(
            f"the ledger {self.path} is corrupt ({why}); accelkit will not reset it, since that "
            "could hand out devices that running processes hold. If no accelkit work runs on "
            f"this node (or after a reboot), remove it: rm {self.path}"
        )

    def _foreign(self, version: object) -> LedgerError:
        if isinstance(version, int) and not isinstance(version, bool) and version > VERSION:
            return LedgerError(
                f"the ledger {self.path} has version {version}, written by a newer accelkit; "
                f"this one reads version {VERSION}. Use the newer accelkit for work on this "
                "node, or give this one another ledger (--ledger PATH, path=...) while no work "
                "of the newer one runs"
            )
        return self.corrupt(f"version {version!r}, where this accelkit reads {VERSION}")


def _private_directory(directory: Path) -> None:
    """Create the per-user ledger directory (mode 0700), and refuse one another user owns."""
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = directory.lstat()
    except OSError as error:
        raise LedgerError(
            f"cannot create the ledger directory {directory}: {error.strerror}"
        ) from None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise LedgerError(
            f"{directory} is not a directory of this user (uid {os.getuid()}); accelkit keeps "
            f"its per-user ledger there. Remove it, or set {LEDGER_VAR} to another path"
        )


def _list(value: object, key: str) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError(f"{key} is {value!r:.80}, not a list")
    return value


def _time(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"a time is {value!r:.80}, not a number")
    return float(value)
