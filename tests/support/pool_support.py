"""What the pool's tests share on the test's side (the workers' functions are in pool_targets)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable


def wait_for(path: Path, timeout: float = 60) -> str:
    """The text of ``path`` once a worker has written some, failing the test after ``timeout``
    seconds rather than hanging it."""
    deadline = time.monotonic() + timeout
    while not path.exists() or not path.read_text():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)
    return path.read_text()


def wait_until(condition: Callable[[], bool], timeout: float = 60) -> None:
    """Return once ``condition()`` holds, failing the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"still not so after {timeout} s"
        time.sleep(0.01)
