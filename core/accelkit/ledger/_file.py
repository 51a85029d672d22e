"""The ledger's file: its JSON layout, the lock, and the atomic replace (where it lives:
:mod:`accelkit.ledger._location`).

Every change happens under an exclusive ``fcntl.flock`` on a lock file beside the ledger (the
ledger itself cannot carry the lock: each change replaces it with a new file), and is written to
a temporary file that ``os.replace`` then moves over the ledger, so a reader sees the old state
or the new one, never half of one, whenever a writer is killed. The lock is the kernel's: it
goes with its process, so a holder killed while deciding blocks nobody.

Layout (``"version": 4``)::

    {"version": 4, "boot": "<boot id>", "host": "<host name>",
     "node": {"fingerprint": "...", "summary": "GPU=8"},
     "next_ticket": 3,
     "grants": [{"grant": <Grant.to_dict()>, "holder": {"pid": 41, "start": 9912}, "since": T,
                 "user": 1000, "parent": null, "note": null}],
     "queue": [{"ticket": 2, "holder": {...}, "wants": "GPU=1", "since": T, "user": 1000,
                "parent": null}]}

``user`` is the uid that took the grant (``accelkit ps`` shows it: in a group's ledger the pid
alone does not say whose work it is); ``parent`` is the token of the grant a step was taken
from (null at the node's level); ``note`` says what the holder is, for ``accelkit ps``, when its
command line would not. A device in a grant may carry its ``minor`` (version 3: an accelkit
reading version 2 refuses that key as corrupt, so the layout names the newer version instead).
``host`` (version 4) names the machine that wrote it: records under another boot id are a
reboot's leftovers on this machine, but another machine's live grants on another one (a ledger
on a network file system), which are refused rather than dropped.
Version 1, 2 and 3 files are read as they are, so a node's accelkit can be upgraded while grants
are live; an older accelkit refuses a newer version with a message naming it rather than
calling the file corrupt.

A file that does not read as this layout is reported, naming the file and what to do; it is never
reset silently, since a reset would hand out devices that running processes hold.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from math import isfinite
from typing import Any, Optional

from accelkit._json import check_keys
from accelkit.errors import LedgerError
from accelkit.ledger._holder import Holder, boot_id, host_name
from accelkit.ledger._location import LEDGER_VAR

__all__ = [
    "READS",
    "VERSION",
    "LedgerFile",
    "LedgerState",
    "Record",
    "Ticket",
]

VERSION = 4
"""The layout this accelkit writes."""
READS = (1, 2, 3, VERSION)
"""The layouts it reads (an older file as it is); any other is refused with a message."""

_REQUIRED = ("version", "boot", "node", "next_ticket", "grants", "queue")
_KEYS = (*_REQUIRED, "host")
_RECORD_REQUIRED = ("grant", "holder", "since")
_RECORD_KEYS = (*_RECORD_REQUIRED, "user", "parent", "note")
_TICKET_REQUIRED = ("ticket", "holder", "wants", "since")
_TICKET_KEYS = (*_TICKET_REQUIRED, "user", "parent", "sees")


class Record:
    """A live grant: its ``Grant.to_dict()``, its holder, since when (epoch seconds), the uid
    that took it (None in version 1 files), the grant it is a step of, and a note for people."""

    __slots__ = ("grant", "holder", "note", "parent", "since", "user")

    def __init__(
        self,
        grant: dict[str, Any],
        holder: Holder,
        since: float,
        user: Optional[int] = None,
        parent: Optional[int] = None,
        note: Optional[str] = None,
    ) -> None:
        self.grant = grant
        self.holder = holder
        self.since = since
        self.user = user
        self.parent = parent
        self.note = note

    @property
    def token(self) -> int:
        token: int = self.grant["token"]
        return token

    def to_dict(self) -> dict[str, Any]:
        return {
            "grant": self.grant,
            "holder": self.holder.to_dict(),
            "since": self.since,
            "user": self.user,
            "parent": self.parent,
            "note": self.note,
        }


class Ticket:
    """A request waiting its turn: arrival number, holder, what it wants (text), since when, the
    uid that asked, the grant whose devices it waits for (None: the node's), and the devices it
    could take there when it sees only some of them (None: every one)."""

    __slots__ = ("holder", "parent", "sees", "since", "ticket", "user", "wants")

    def __init__(
        self,
        ticket: int,
        holder: Holder,
        wants: str,
        since: float,
        user: Optional[int] = None,
        parent: Optional[int] = None,
        sees: Optional[frozenset[tuple[str, str]]] = None,
    ) -> None:
        self.ticket = ticket
        self.holder = holder
        self.wants = wants
        self.since = since
        self.user = user
        self.parent = parent
        self.sees = sees

    def to_dict(self) -> dict[str, Any]:
        return {
            "ticket": self.ticket,
            "holder": self.holder.to_dict(),
            "wants": self.wants,
            "since": self.since,
            "user": self.user,
            "parent": self.parent,
            "sees": None if self.sees is None else [list(key) for key in sorted(self.sees)],
        }


class LedgerState:
    """The ledger's content while the lock is held; ``changed`` makes the writer save it."""

    __slots__ = ("boot", "changed", "grants", "host", "next_ticket", "node", "queue")

    def __init__(
        self,
        boot: str,
        node: Optional[dict[str, str]] = None,
        next_ticket: int = 1,
        host: Optional[str] = None,
    ) -> None:
        self.boot = boot
        self.host = host
        """The machine that wrote the state (None in files before version 4)."""
        self.node = node
        self.next_ticket = next_ticket
        self.grants: list[Record] = []
        self.queue: list[Ticket] = []
        self.changed = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": VERSION,
            "boot": self.boot,
            "host": self.host,
            "node": self.node,
            "next_ticket": self.next_ticket,
            "grants": [r.to_dict() for r in self.grants],
            "queue": [t.to_dict() for t in self.queue],
        }


class LedgerFile:
    """One ledger file: read it, change it under the lock, replace it atomically.

    Thread-safe: threads of one process take turns (a lock per object), processes take turns on
    the file lock, which is opened again after a fork (a child must never share its parent's).
    """

    def __init__(self, path: str, *, private_parent: bool = False) -> None:
        """``path``: absolute. ``private_parent``: the per-user default, whose directory is made
        (mode 0700) and must belong to this user; any other ledger's directory must exist."""
        self.path = path
        self.directory = os.path.dirname(path)
        self.lock_path = path + ".lock"
        self._temp_path = path + ".tmp"
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

    def writable(self) -> bool:
        """Whether this process may change the ledger: its directory exists (or is the per-user
        one, made on first use) and takes new files, and the ledger, when there, is writable."""
        if not os.path.isdir(self.directory):
            return self._private_parent
        if not os.access(self.directory, os.W_OK | os.X_OK):
            return False
        return not os.path.exists(self.path) or os.access(self.path, os.W_OK)

    def peek(self) -> LedgerState:
        """The state now, read without the lock and never written (for a ledger this process
        may only read): each change replaces the file whole, so the read is of one state."""
        return self._read()

    # -- the lock ----------------------------------------------------------------------------
    def _lock_fd(self) -> int:
        if self._fd is not None and self._fd_pid == os.getpid():
            return self._fd
        directory = self.directory
        if self._private_parent:
            _private_directory(directory)
        elif not os.path.isdir(directory):
            raise LedgerError(
                f"cannot use the ledger {self.path}: its directory {directory} does not exist. "
                f"Create it (for a group: mkdir -m 2770 {directory}; chgrp GROUP {directory})"
            )
        # The ledger and its lock take the directory's read and write bits, whatever the
        # umask: private in a private directory, group-writable in a group's.
        self._mode = stat.S_IMODE(os.stat(directory).st_mode) & 0o666
        # Never through a symbolic link: in a group's directory any member could point the lock
        # at a file of whoever runs accelkit next, who would create it or change its mode.
        flags = os.O_CLOEXEC | os.O_NOFOLLOW
        try:
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | flags, self._mode)
        except PermissionError:
            try:
                fd = os.open(self.lock_path, os.O_RDONLY | flags)
            except OSError as error:
                raise self._unwritable(error) from None
        except OSError as error:
            if os.path.islink(self.lock_path):
                raise self._linked_lock() from None
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
            return LedgerState(boot=boot_id(), host=host_name())
        except OSError as error:
            raise LedgerError(f"cannot read the ledger {self.path}: {error.strerror}") from None
        try:
            return self._parse(json.loads(raw))
        except ValueError as error:
            raise self.corrupt(str(error)) from None
        except RecursionError:  # json nests by recursion: a ledger is never this deep
            raise self.corrupt("its JSON is nested too deeply to be a ledger") from None

    def _parse(self, data: Any) -> LedgerState:
        if isinstance(data, dict) and not (
            _whole(data.get("version")) and data["version"] in READS
        ):
            raise self._foreign(data.get("version"))
        data = check_keys(data, _KEYS, "the ledger", required=_REQUIRED)
        boot = data["boot"]
        if not isinstance(boot, str):  # read as another boot, it would drop every live grant
            raise ValueError(f"its boot id is {boot!r:.80}, not text")
        host = data.get("host")
        if host is not None and not isinstance(host, str):
            raise ValueError(f"its host name is {host!r:.80}, not text")
        node = data["node"]
        if node is not None and not (
            isinstance(node, dict)
            and sorted(node) == ["fingerprint", "summary"]
            and all(isinstance(v, str) for v in node.values())
        ):
            raise ValueError(f"its node is {{'fingerprint': ..., 'summary': ...}}, not {node!r}")
        next_ticket = data["next_ticket"]
        if not isinstance(next_ticket, int) or isinstance(next_ticket, bool):
            raise ValueError(f"next_ticket is {next_ticket!r}, not a whole number")
        state = LedgerState(boot=boot, node=node, next_ticket=next_ticket, host=host)
        for entry in _list(data["grants"], "grants"):
            entry = check_keys(entry, _RECORD_KEYS, "a ledger grant", required=_RECORD_REQUIRED)
            grant = entry["grant"]
            if not isinstance(grant, dict) or not _whole(grant.get("token")):
                raise ValueError(f"a recorded grant is {entry['grant']!r:.80}")
            note = entry.get("note")
            if note is not None and not isinstance(note, str):
                raise ValueError(f"a grant's note is {note!r:.80}, not text")
            state.grants.append(
                Record(
                    entry["grant"],
                    Holder.from_dict(entry["holder"]),
                    _time(entry["since"]),
                    user=_optional_whole(entry.get("user"), "a grant's user"),
                    parent=_optional_whole(entry.get("parent"), "a grant's parent"),
                    note=note,
                )
            )
        for entry in _list(data["queue"], "queue"):
            entry = check_keys(entry, _TICKET_KEYS, "a ledger ticket", required=_TICKET_REQUIRED)
            number = entry["ticket"]
            if not _whole(number):
                raise ValueError(f"a ticket number is {number!r}")
            state.queue.append(
                Ticket(
                    number,
                    Holder.from_dict(entry["holder"]),
                    str(entry["wants"]),
                    _time(entry["since"]),
                    user=_optional_whole(entry.get("user"), "a ticket's user"),
                    parent=_optional_whole(entry.get("parent"), "a ticket's parent"),
                    sees=_device_keys(entry.get("sees")),
                )
            )
        _check_once([r.token for r in state.grants], "grant token")
        _check_once([t.ticket for t in state.queue], "ticket number")
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
                _write_all(fd, text)
                os.fsync(fd)  # on disk before it replaces the ledger, which a crash would empty
            finally:
                os.close(fd)
            os.replace(self._temp_path, self.path)
        except OSError as error:
            with suppress(OSError):
                os.unlink(self._temp_path)  # part of a state: the ledger keeps the one before
            raise self._unwritable(error) from None

    # -- errors for people -------------------------------------------------------------------
    def _unwritable(self, error: OSError) -> LedgerError:
        directory = self.directory
        if error.errno in _FULL:
            return LedgerError(
                f"cannot write the ledger {self.path} ({error.strerror}): the change was not "
                f"made, and the ledger keeps its state before it. Make room on the file system "
                f"of {directory} (or raise the limit), or give a ledger elsewhere (--ledger PATH, "
                f"path=..., or {LEDGER_VAR})"
            )
        return LedgerError(
            f"cannot write the ledger {self.path} ({error.strerror}): every process that shares "
            f"it needs read and write permission on {directory}, where the ledger is replaced "
            f"on each change and {os.path.basename(self.lock_path)} is locked. Fix the "
            f"permissions of {directory}, or give a ledger in a directory you can write "
            f"(--ledger PATH, path=..., or {LEDGER_VAR})"
        )

    def _linked_lock(self) -> LedgerError:
        return LedgerError(
            f"the ledger's lock {self.lock_path} is a symbolic link, which accelkit does not "
            "follow (whoever may write the ledger's directory could aim it at a file of yours); "
            f"remove it (rm {self.lock_path}): accelkit makes the lock again"
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


def _private_directory(directory: str) -> None:
    """Create the per-user ledger directory (mode 0700), and refuse one another user owns."""
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        info = os.lstat(directory)
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


def _check_once(numbers: list[int], what: str) -> None:
    """Each grant and ticket is recorded once: a second record of one would count its devices
    twice, or release them while the first still holds them."""
    seen: set[int] = set()
    for number in numbers:
        if number in seen:
            raise ValueError(f"{what} {number} is recorded twice")
        seen.add(number)


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _optional_whole(value: object, what: str) -> Optional[int]:
    """A uid or a grant token, or None (absent in version 1 files, null at the node's level)."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise ValueError(f"{what} is {value!r:.80}, not a whole number")


def _time(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not isfinite(value):
        raise ValueError(f"a time is {value!r:.80}, not a finite number")
    return float(value)


_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
"""Write errors of a full file system, a quota or a file-size limit: no matter of permissions."""


def _write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data``: a write may take only part of it (a file system nearly
    full), and the rest then fails with the reason, which the caller reports."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _device_keys(value: object) -> Optional[frozenset[tuple[str, str]]]:
    """A ticket's ``sees``: null, or a list of ``[family, id]`` pairs."""
    if value is None:
        return None
    pairs = _list(value, "a ticket's devices")
    if not all(
        isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair)
        for pair in pairs
    ):
        raise ValueError(f"a ticket's devices are [family, id] pairs, not {value!r:.80}")
    return frozenset((family, device) for family, device in pairs)
