"""Run the conformance checks without pytest: what ``accelkit check`` uses.

Expected failures work as in the pytest suite: declared with a reason, and strict — a check that
was expected to fail but passes is itself a failure, so a stale declaration cannot hide a fix.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Optional

from accelkit.testing._catalog import Check, all_checks, find_check
from accelkit.testing._subject import Noted, Skipped, Subject

__all__ = [
    "FAILING",
    "Outcome",
    "normalize_expected_failures",
    "run_check",
    "run_checks",
]

FAILING = ("failed", "error", "xpassed")
"""Statuses that make a run fail."""


@dataclass(frozen=True)
class Outcome:
    """One check's result: ``passed``, ``noted`` (passed, with a note for the plugin's author:
    a deprecation), ``failed``, ``error`` (the check itself broke), ``skipped``, ``xfailed``
    (failed as declared) or ``xpassed`` (declared, but passed)."""

    check: str
    topic: str
    status: str
    message: str = ""

    @property
    def failing(self) -> bool:
        return self.status in FAILING

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def normalize_expected_failures(declared: Optional[Mapping[str, str]]) -> dict[str, str]:
    """``{check name: reason}``; raises ``ValueError`` for an unknown check or a missing reason.

    Keys may be check names (``empty_host``) or test names (``test_empty_host``).
    """
    normalized: dict[str, str] = {}
    for name, reason in (declared or {}).items():
        try:
            known = find_check(name)
        except KeyError as exc:
            raise ValueError(exc.args[0]) from None
        if not isinstance(reason, str) or not reason.strip():
            raise ValueError(
                f"expected failure {name!r} needs a reason: say why it fails and when it will not"
            )
        normalized[known.name] = reason.strip()
    return normalized


def run_check(check: Check, subject: Subject, expected: Optional[str] = None) -> Outcome:
    """Run one check; ``expected`` is the declared reason when it is expected to fail."""
    note = ""
    try:
        check.function(subject)
    except Skipped as exc:
        return Outcome(check.name, check.topic, "skipped", str(exc))
    except Noted as exc:
        note = str(exc)
    except AssertionError as exc:
        message = str(exc) or "assertion failed"
        if expected is not None:
            return Outcome(check.name, check.topic, "xfailed", f"{expected} ({message})")
        return Outcome(check.name, check.topic, "failed", message)
    except Exception as exc:
        where = traceback.extract_tb(exc.__traceback__)[-1]
        message = f"{type(exc).__name__}: {exc} (at {where.filename}:{where.lineno})"
        if expected is not None:
            return Outcome(check.name, check.topic, "xfailed", f"{expected} ({message})")
        return Outcome(check.name, check.topic, "error", message)
    if expected is not None:
        return Outcome(
            check.name,
            check.topic,
            "xpassed",
            f"declared as an expected failure ({expected}) but passed: remove the declaration",
        )
    return Outcome(check.name, check.topic, "noted" if note else "passed", note)


def run_checks(
    subject: Subject,
    *,
    select: Optional[Iterable[str]] = None,
    expected_failures: Optional[Mapping[str, str]] = None,
) -> list[Outcome]:
    """Run every check (or those named in ``select``) on ``subject``, in catalogue order."""
    expected = normalize_expected_failures(expected_failures)
    chosen = all_checks()
    if select is not None:
        wanted = {find_check(name).name for name in select}
        chosen = tuple(c for c in chosen if c.name in wanted)
    return [run_check(c, subject, expected.get(c.name)) for c in chosen]
