"""Module-level functions for LocalHost.probe tests (a spawned process imports them by name)."""

from __future__ import annotations

import time
from typing import Any, Callable


def answer(import_module: Callable[[str], Any], count: int) -> dict[str, Any]:
    json = import_module("json")
    return {"devices": [str(n) for n in range(count)], "dumped": json.dumps([1])}


def fail(import_module: Callable[[str], Any]) -> None:
    raise RuntimeError("driver said no")


def need_missing_library(import_module: Callable[[str], Any]) -> None:
    import_module("accelkit_no_such_vendor_library")


def hang(import_module: Callable[[str], Any]) -> None:
    time.sleep(30)


def die(import_module: Callable[[str], Any]) -> None:
    import os

    os._exit(3)


def import_error_inside_a_call(import_module: Callable[[str], Any]) -> None:
    """The library imports, then one of its calls raises ImportError (a missing .so)."""
    import_module("json")
    raise ImportError("libfoo.so: cannot open shared object file")


def measure(import_module: Callable[[str], Any], text: str) -> int:
    """The length of ``text``: a request larger than a pipe holds reaches the probe whole."""
    return len(text)


def flood(import_module: Callable[[str], Any]) -> None:
    """A library that prints past any bound, then goes on running."""
    import sys

    sys.stdout.write("x" * 8_000_000)
    sys.stdout.flush()
    time.sleep(30)


def linger(import_module: Callable[[str], Any], pid_file: str) -> None:
    """A library call that never returns, its process's pid written to ``pid_file`` first."""
    import os

    with open(pid_file, "w") as file:
        file.write(str(os.getpid()))
    time.sleep(60)
