"""The pids of the processes a test's code starts, as ``Popen`` gave them."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest


def record_started(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that gets the pid of every ``subprocess.Popen`` started from here on in the test.

    A test that must find a killed process knows it by this pid, not by one the process writes
    itself: on a loaded machine it may not have started far enough to write it before its
    deadline (it is killed all the same)."""
    started: list[int] = []

    class Recorded(subprocess.Popen[bytes]):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            started.append(self.pid)

    monkeypatch.setattr(subprocess, "Popen", Recorded)
    return started
