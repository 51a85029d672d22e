"""Why each family found what it found: notes collected while a manager detects.

A detection layer that finds nothing, a command that times out, a file that is garbage: none of
these is an exception, each is a :class:`Diagnostic`. Managers call :func:`note`; the core
collects the notes per family with :func:`collecting` and puts them on the ``Node``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import asdict, dataclass
from typing import Any, Literal, Optional

from ._json import check_keys

__all__ = ["LEVELS", "Diagnostic", "Level", "collecting", "note"]

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
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Diagnostic:
        """Rebuild from :meth:`to_dict`; a malformed record is a ``ValueError`` saying why."""
        fields = ("family", "level", "message")
        check_keys(data, fields, "a diagnostic", required=fields)
        if not all(isinstance(data[f], str) for f in fields):
            raise ValueError(f"a diagnostic's {', '.join(fields)} are strings, got {data!r}")
        return cls(family=data["family"], level=data["level"], message=data["message"])


_sink: ContextVar[Optional[tuple[str, list[Diagnostic]]]] = ContextVar(
    "accelkit_diagnostics", default=None
)


def note(message: str, level: Level = "info") -> None:
    """Record a finding for the family being detected; a no-op outside detection.

    A finding already recorded for the family (two detection layers that both find a vendor
    command missing) is kept once: diagnostics are for reading.
    """
    current = _sink.get()
    if current is not None:
        family, notes = current
        finding = Diagnostic(family, level, message)
        if finding not in notes:
            notes.append(finding)


@contextlib.contextmanager
def collecting(family: str) -> Iterator[list[Diagnostic]]:
    """Collect every :func:`note` made inside the block for ``family``."""
    notes: list[Diagnostic] = []
    token = _sink.set((family, notes))
    try:
        yield notes
    finally:
        _sink.reset(token)
