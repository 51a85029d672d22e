"""Why each family found what it found: notes collected while a manager detects.

A detection layer that finds nothing, a command that times out, a file that is garbage: none of
these is an exception, each is a :class:`Diagnostic`. Managers call :func:`note`; the core
collects the notes per family with :func:`collecting` and puts them on the ``Node``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal, Optional

from accelkit._json import check_keys
from accelkit.errors import InvalidData

__all__ = ["LEVELS", "MAX_NOTES", "Diagnostic", "Level", "collecting", "note"]

Level = Literal["info", "warning", "error"]
LEVELS: tuple[Level, ...] = ("info", "warning", "error")


@dataclass(frozen=True)
class Diagnostic:
    """One finding: the family it concerns, how serious it is, and what to do about it."""

    family: str
    level: Level
    message: str

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise ValueError(f"diagnostic level must be one of {LEVELS}, got {self.level!r}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form; :meth:`from_dict` restores it."""
        return {"family": self.family, "level": self.level, "message": self.message}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Diagnostic:
        """Rebuild from :meth:`to_dict`; a malformed record is an ``InvalidData`` saying why."""
        fields = ("family", "level", "message")
        check_keys(data, fields, "a diagnostic", required=fields)
        if not all(isinstance(data[f], str) for f in fields) or data["level"] not in LEVELS:
            raise InvalidData(
                f"a diagnostic's {', '.join(fields)} are strings, the level one of {LEVELS}; "
                f"got {data!r:.200}"
            )
        return cls(family=data["family"], level=data["level"], message=data["message"])


MAX_NOTES = 100
"""The most findings kept per family and detection: 40 KB of garbage output must not become
20,000 diagnostics. The ones beyond are counted, and one last finding says how many were cut."""


class _Collector:
    """One family's findings while it is detected: in order, each once, at most MAX_NOTES."""

    __slots__ = ("cut", "family", "notes", "seen")

    def __init__(self, family: str) -> None:
        self.family = family
        self.notes: list[Diagnostic] = []
        self.seen: set[Diagnostic] = set()
        self.cut = 0

    def add(self, finding: Diagnostic) -> None:
        if finding in self.seen:
            return
        if len(self.notes) >= MAX_NOTES:
            self.cut += 1
            return
        self.seen.add(finding)
        self.notes.append(finding)


_sink: ContextVar[Optional[_Collector]] = ContextVar("accelkit_diagnostics", default=None)


def note(message: str, level: Level = "info") -> None:
    """Record a finding for the family being detected; a no-op outside detection.

    A finding already recorded for the family (two detection layers that both find a vendor
    command missing) is kept once: diagnostics are for reading. Beyond :data:`MAX_NOTES`
    findings, the rest are counted and reported as cut.
    """
    collector = _sink.get()
    if collector is not None:
        collector.add(Diagnostic(collector.family, level, message))


@contextlib.contextmanager
def collecting(family: str) -> Iterator[list[Diagnostic]]:
    """Collect every :func:`note` made inside the block for ``family``."""
    collector = _Collector(family)
    token = _sink.set(collector)
    try:
        yield collector.notes
    finally:
        _sink.reset(token)
        if collector.cut:
            collector.notes.append(
                Diagnostic(
                    family,
                    "warning",
                    f"{collector.cut} further finding(s) were cut: at most {MAX_NOTES} are kept "
                    "per family (accelkit.diagnostics.MAX_NOTES)",
                )
            )
