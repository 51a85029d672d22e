"""The catalogue of conformance checks, by topic, in the order they run and are reported.

A check is a plain function of a :class:`~accelkit.testing._subject.Subject` that raises
``AssertionError`` with a message for the plugin author when the plugin is wrong, and
:class:`~accelkit.testing._subject.Skipped` when it cannot run. The pytest mixins and the
``accelkit check`` runner are both generated from this catalogue.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

from accelkit.testing._subject import Subject

__all__ = ["TOPICS", "Check", "all_checks", "check", "checks_of", "find_check"]

TOPICS = ("contract", "detection", "visibility", "quantities", "hygiene", "packaging")
"""Topics in report order; each has a module ``accelkit.testing.<topic>_checks``."""

CheckFunction = Callable[[Subject], None]


@dataclass(frozen=True)
class Check:
    """One conformance check: its name (``empty_host``), topic, and what it proves."""

    name: str
    topic: str
    function: CheckFunction
    description: str

    @property
    def test_name(self) -> str:
        """The name of the pytest method that runs it."""
        return f"test_{self.name}"


_registered: list[Check] = []


def check(topic: str) -> Callable[[CheckFunction], CheckFunction]:
    """Register the decorated function as a check of ``topic``; its docstring describes it."""
    if topic not in TOPICS:
        raise ValueError(f"unknown check topic {topic!r}; topics are {TOPICS}")

    def register(function: CheckFunction) -> CheckFunction:
        doc = (function.__doc__ or "").strip().splitlines()
        _registered.append(Check(function.__name__, topic, function, doc[0] if doc else ""))
        return function

    return register


def all_checks() -> tuple[Check, ...]:
    """Every check, by topic in :data:`TOPICS` order, then in definition order."""
    for topic in TOPICS:
        importlib.import_module(f"._{topic}_checks", __package__)
    return tuple(sorted(_registered, key=lambda c: TOPICS.index(c.topic)))


def checks_of(topic: str) -> tuple[Check, ...]:
    """The checks of one topic."""
    return tuple(c for c in all_checks() if c.topic == topic)


def find_check(name: str) -> Check:
    """A check by name (``empty_host`` or ``test_empty_host``); ``KeyError`` lists them all."""
    wanted = name[len("test_") :] if name.startswith("test_") else name
    for candidate in all_checks():
        if candidate.name == wanted:
            return candidate
    known = ", ".join(c.name for c in all_checks())
    raise KeyError(f"no conformance check named {name!r}; the checks are: {known}")
