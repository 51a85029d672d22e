"""The ledger's file: reading it, the lock, and the atomic replace (where it lives:
:mod:`accelkit.ledger._location`).

Every change happens under an exclusive ``fcntl.flock`` on a lock file beside the ledger (the
ledger itself cannot carry the lock: each change replaces it with a new file), and is written to
a temporary file that ``os.replace`` then moves over the ledger, so a reader sees the old state
or the new one, never half of one, whenever a writer is killed. The lock is the kernel's: it
goes with its process, so a holder killed while deciding blocks nobody.

A file that does not read as a ledger (its layout and parsing: :mod:`accelkit.ledger._state`)
is reported, naming the file and what to do; it is never reset silently, since a reset would
hand out devices that running processes hold.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Optional

from accelkit.errors import LedgerError
from accelkit.ledger._forks import renew_after_fork
from accelkit.ledger._holder import boot_id
from accelkit.ledger._location import LEDGER_VAR
from accelkit.ledger._state import (
    READS,
    VERSION,
    LedgerState,
    never_a_ledger,
    never_ledger_text,
    state_from_dict,
)

__all__ = ["LedgerFile"]


class LedgerFile:
    """One ledger file: read it, change it under the lock, replace it atomically.

    Thread-safe: threads of one process take turns (a lock per object, a forked child's its
    own), processes take turns on the file lock, which is opened again after a fork (a child
    must never share its parent's).
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
        renew_after_fork(self)

    def after_fork(self) -> None:
        """In a forked child: a lock of its own for its threads (a thread of the parent may have
        held it), and no copy of the parent's lock file descriptor, through which the child
        would keep the parent's lock held once the parent ended."""
        self._threads = threading.Lock()
        if self._fd is not None:
            with suppress(OSError):
                os.close(self._fd)
            self._fd = None

    @contextmanager
    def locked(self) -> Iterator[LedgerState]:
        """The current state, under the exclusive lock; saved on exit if ``changed`` is set."""
        with self._threads:
            fd = self._locked_fd()
            try:
                state = self._read()
                yield state
                if state.changed:
                    self._write(state)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)

    def writable(self) -> bool:
        """Whether this process may change the ledger: its directory exists (or is the per-user
        one, made on first use) and takes new files, and the ledger, when there, is writable.
        A per-user directory another user made is refused (:class:`~accelkit.LedgerError`)."""
        if self._private_parent:
            _check_private(self.directory)
        if not os.path.isdir(self.directory):
            return self._private_parent
        if not os.access(self.directory, os.W_OK | os.X_OK):
            return False
        return not os.path.exists(self.path) or os.access(self.path, os.W_OK)

    def peek(self) -> LedgerState:
        """The state now, read without the lock and never written (for a ledger this process
        may only read): each change replaces the file whole, so the read is of one state. A
        per-user directory another user made is refused, never read: they chose what is in it."""
        if self._private_parent:
            _check_private(self.directory)
        return self._read()

    # -- the lock ----------------------------------------------------------------------------
    def _locked_fd(self) -> int:
        """The lock file's descriptor, locked. A lock file removed meanwhile (``rm``, or a
        temp-dir cleaner after days without a change) would leave this process locking a file
        that others no longer open, each side deciding alone: a lock whose file is gone, or is
        another file now, is dropped and the path's lock taken instead."""
        while True:
            fd = self._lock_fd()
            self._lock(fd)
            if _is_at(fd, self.lock_path):
                return fd
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            self._fd = None

    def _lock(self, fd: int) -> None:
        """Take the lock, waiting at most :data:`_LOCK_PATIENCE` seconds: a decision holds it for
        milliseconds, so a process that keeps it longer is stopped or stuck, and every process
        of the node would otherwise wait with it, their own timeouts never reached."""
        deadline = time.monotonic() + _LOCK_PATIENCE
        pause = 0.0002
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LedgerError(
                        f"the ledger's lock {self.lock_path} has been held for "
                        f"{_LOCK_PATIENCE:g} s by another process, where a decision takes "
                        f"milliseconds: that process is stopped or stuck (fuser -v "
                        f"{self.lock_path} names it); end it, and accelkit goes on"
                    ) from None
                time.sleep(pause)
                pause = min(pause * 2, 0.01)

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
        # The ledger takes the directory's read and write bits, whatever the umask: private in a
        # private directory, group-writable in a group's, readable by those who may list it.
        # The lock only by those who may change the ledger: whoever can open it can lock it
        # (read-only too), and hold up every decision on the node.
        directory_mode = stat.S_IMODE(os.stat(directory).st_mode)
        self._mode = directory_mode & 0o666
        lock_mode = _writers_only(directory_mode)
        # Never through a symbolic link: in a group's directory any member could point the lock
        # at a file of whoever runs accelkit next, who would create it or change its mode.
        flags = os.O_CLOEXEC | os.O_NOFOLLOW
        try:
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | flags, lock_mode)
        except PermissionError:
            try:
                fd = os.open(self.lock_path, os.O_RDONLY | flags)
            except OSError as error:
                raise self._unwritable(error) from None
        except OSError as error:
            if os.path.islink(self.lock_path):
                raise self._linked(self.lock_path) from None
            raise self._unwritable(error) from None
        if os.fstat(fd).st_uid == os.getuid():
            with suppress(OSError):
                os.fchmod(
                    fd, lock_mode
                )  # whatever this process's umask (or an older accelkit) said
        self._fd, self._fd_pid = fd, os.getpid()
        return fd

    # -- reading -----------------------------------------------------------------------------
    def _read(self) -> LedgerState:
        try:
            raw = _ledger_bytes(self.path)
        except FileNotFoundError:
            return LedgerState(boot=boot_id())
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise self._linked(self.path) from None
            raise LedgerError(f"cannot read the ledger {self.path}: {error.strerror}") from None
        except ValueError as error:
            raise self.corrupt(str(error)) from None
        try:
            data = json.loads(raw)
        except ValueError as error:
            if never_ledger_text(raw):
                raise self._stranger("it is not JSON") from None
            raise self.corrupt(str(error)) from None
        except RecursionError:  # json nests by recursion: a ledger is never this deep
            raise self.corrupt("its JSON is nested too deeply to be a ledger") from None
        stranger = never_a_ledger(data)
        if stranger is not None:
            raise self._stranger(stranger)
        try:
            version = data.get("version")
            known = isinstance(version, int) and not isinstance(version, bool) and version in READS
            if not known:
                raise self._foreign(version)
            return state_from_dict(data)
        except ValueError as error:
            raise self.corrupt(str(error)) from None

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
        if error.filename == self._temp_path and os.path.isdir(self._temp_path):
            return LedgerError(
                f"cannot write the ledger {self.path}: each change is written to "
                f"{self._temp_path} and then moved over the ledger, and a directory is in the "
                f"way there; remove it (rm -r {self._temp_path}), since no accelkit makes one"
            )
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

    def _linked(self, path: str) -> LedgerError:
        what = "the ledger's lock" if path == self.lock_path else "the ledger"
        return LedgerError(
            f"{what} {path} is a symbolic link, which accelkit does not follow (whoever may "
            "write the ledger's directory could aim it at a file of yours); remove it "
            f"(rm {path}): accelkit makes it again"
        )

    def corrupt(self, why: str) -> LedgerError:
        """The error for a ledger that does not read as a ledger: what to do, never a reset."""
        return LedgerError(
            f"the ledger {self.path} is corrupt ({why}); accelkit will not reset it, since that "
            "could hand out devices that running processes hold. If no accelkit work runs on "
            f"this node (or after a reboot), remove it: rm {self.path}"
        )

    def _stranger(self, what: str) -> LedgerError:
        """The error for a file no accelkit wrote as a ledger (:func:`never_a_ledger`): the path
        is wrong, and the file is someone's own, never to remove."""
        return LedgerError(
            f"{self.path} is not an accelkit ledger ({what}); accelkit leaves it as it is. Give "
            f"the path of the node's ledger, or of a file to make (--ledger PATH, path=..., or "
            f"{LEDGER_VAR})"
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
    except OSError as error:
        raise LedgerError(
            f"cannot create the ledger directory {directory}: {error.strerror}"
        ) from None
    _check_private(directory)


def _check_private(directory: str) -> None:
    """Refuse a per-user ledger directory that is not this user's (another user made it first,
    in a shared temp directory, and chose what is in it); one of this user's that others may
    write is made private again. A directory not there yet passes: it is made on first use."""
    try:
        info = os.lstat(directory)
    except FileNotFoundError:
        return
    except OSError as error:
        raise LedgerError(
            f"cannot use the ledger directory {directory}: {error.strerror}"
        ) from None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise LedgerError(
            f"{directory} is not a directory of this user (uid {os.getuid()}), where accelkit "
            "keeps its per-user ledger: another user made it (in a shared temp directory you "
            f"cannot remove it; its owner or an administrator can). Set {LEDGER_VAR} to a ledger "
            "in a directory of yours on this machine (e.g. "
            f"{LEDGER_VAR}=$HOME/.cache/accelkit/$(hostname)/ledger.json, its directory made)"
        )
    if stat.S_IMODE(info.st_mode) & 0o077:
        with suppress(OSError):
            os.chmod(directory, 0o700)


_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
"""Write errors of a full file system, a quota or a file-size limit: no matter of permissions."""


_LOCK_PATIENCE = 30.0
"""Seconds a process waits for the ledger's lock before it says who may be holding it."""

_LARGEST = 16 * 2**20
"""Bytes no ledger reaches (thousands of grants take hundreds of kilobytes)."""


def _writers_only(directory_mode: int) -> int:
    """The lock file's mode: read and write for the owner, and for the group and others where
    the directory lets them write (change the ledger), nothing where it does not."""
    mode = 0o600
    if directory_mode & stat.S_IWGRP:
        mode |= 0o060
    if directory_mode & stat.S_IWOTH:
        mode |= 0o006
    return mode


def _ledger_bytes(path: str) -> bytes:
    """The ledger's bytes. Whoever may write its directory may put anything at its path: it is
    opened without following a symbolic link (``ELOOP``) or waiting for a writer to a FIFO, and
    read only as a regular file no larger than any ledger (``ValueError`` otherwise), so that no
    process reading it stalls or fills its memory."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError("it is not a regular file (a FIFO, a device or a socket)")
        if info.st_size > _LARGEST:
            raise ValueError(f"it is larger than any ledger ({_LARGEST} bytes)")
        return file.read(info.st_size + 1)  # a state is written whole, then moved into place


def _write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data``: a write may take only part of it (a file system nearly
    full), and the rest then fails with the reason, which the caller reports."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _is_at(fd: int, path: str) -> bool:
    """Whether the file open as ``fd`` is the one ``path`` names now."""
    try:
        named = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)
