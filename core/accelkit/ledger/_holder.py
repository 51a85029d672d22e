"""``Holder``: the process that holds a ledger grant, named so that pid reuse cannot fake it.

A pid alone is not an identity: after a holder dies the kernel hands its pid to a new process,
which would keep the dead holder's grant alive for ever. A holder is therefore the pid with the
process's start time (``/proc/<pid>/stat`` field 22, clock ticks since boot), which ``exec``
keeps and a reused pid does not share. Machines without ``/proc`` fall back to the pid alone.
"""

from __future__ import annotations

import os
from functools import cache
from typing import NamedTuple, Optional

__all__ = ["Holder", "boot_id"]

_PROC = "/proc"
_START_FIELD = 22
"""``starttime`` in proc(5): the process's start, in clock ticks after boot."""
_PID_LIMIT = 2**31
"""Above every pid a kernel gives (``pid_t`` is a C int; ``os.kill`` refuses more)."""
_STOPPED_STATES = ("T", "t")
"""Stopped by a signal, or by a tracer."""
_GONE_STATES = ("Z", "X")
"""A zombie (exited, not yet reaped) or dead process holds nothing any more. The state in
``/proc/<pid>/stat`` is its first thread's: see :func:`_gone`."""


class Holder(NamedTuple):
    """A process by pid and start time (0 where the start time cannot be read)."""

    pid: int
    start: int

    @classmethod
    def current(cls) -> Holder:
        """This process (read again after a fork: the child is another holder)."""
        pid = os.getpid()
        cached = _CURRENT.get(pid)
        if cached is None:
            stat = _stat(pid)
            cached = cls(pid, _start_of(stat) if stat else 0)
            _CURRENT.clear()
            _CURRENT[pid] = cached
        return cached

    @classmethod
    def of(cls, pid: int) -> Optional[Holder]:
        """The running process ``pid``, or None when there is none."""
        stat = _stat(pid)
        if stat is not None:
            return None if _gone(pid, stat) else cls(pid, _start_of(stat))
        return cls(pid, 0) if _exists(pid) else None

    def alive(self) -> bool:
        """Whether this very process still runs (not a later one given the same pid)."""
        stat = _stat(self.pid)
        if stat is None:
            # No /proc entry: either no such process, or /proc hides other users' processes
            # (hidepid); the kernel still tells those apart.
            return _exists(self.pid)
        if _gone(self.pid, stat):
            return False
        return self.start == 0 or _start_of(stat) == self.start

    def stopped(self) -> bool:
        """Whether the process is stopped (Ctrl-Z, SIGSTOP, a debugger): it takes nothing until
        it runs again."""
        stat = _stat(self.pid)
        return stat is not None and stat[:1] in _STOPPED_STATES

    def command(self) -> str:
        """The process's command line as text ("" when it cannot be read)."""
        try:
            with open(f"{_PROC}/{self.pid}/cmdline", "rb") as file:
                raw = file.read()
        except OSError:
            return ""
        return " ".join(part.decode(errors="replace") for part in raw.split(b"\0") if part)

    def to_dict(self) -> dict[str, int]:
        """JSON form: ``{"pid": ..., "start": ...}``."""
        return {"pid": self.pid, "start": self.start}

    @classmethod
    def from_dict(cls, data: object) -> Holder:
        """Rebuild from :meth:`to_dict`; ``ValueError`` for anything else."""
        if (
            not isinstance(data, dict)
            or sorted(data) != ["pid", "start"]
            or not all(_whole(v) for v in data.values())
            or not 0 < data["pid"] < _PID_LIMIT
        ):
            raise ValueError(
                f"a holder is {{'pid': N, 'start': N}} with 0 < N < {_PID_LIMIT}, not {data!r:.80}"
            )
        return cls(data["pid"], data["start"])

    def __str__(self) -> str:
        return f"pid {self.pid}"


_CURRENT: dict[int, Holder] = {}


@cache
def boot_id() -> str:
    """This boot's id (``/proc/sys/kernel/random/boot_id``), "" where there is none.

    Every holder recorded under another boot id is gone, whatever its pid and start time say.
    """
    try:
        with open(f"{_PROC}/sys/kernel/random/boot_id") as file:
            return file.read().strip()
    except OSError:
        return ""


def _stat(pid: int) -> Optional[str]:
    """The text of ``/proc/<pid>/stat`` after the command name, or None."""
    try:
        with open(f"{_PROC}/{pid}/stat", "rb") as file:
            raw = file.read()
    except OSError:
        return None
    # The command name is in parentheses and may itself hold spaces and parentheses.
    return raw[raw.rfind(b")") + 2 :].decode(errors="replace")


def _gone(pid: int, stat: str) -> bool:
    """Whether the process has ended. Its ``stat`` shows its first thread: a program whose main
    thread ended with ``pthread_exit`` while its other threads still run (and use the devices)
    reads as a zombie there, so it has ended only once no other thread is left."""
    if stat[:1] not in _GONE_STATES:
        return False
    try:
        return len(os.listdir(f"{_PROC}/{pid}/task")) <= 1
    except OSError:
        return True


def _start_of(stat: str) -> int:
    # The text after "(comm) " starts at field 3 (state).
    return int(stat.split()[_START_FIELD - 3])


def _exists(pid: int) -> bool:
    """Whether any process has ``pid`` (a signal-0 probe: EPERM still means it exists)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
