"""``LocalHost``: the machine this process runs on.

Files are read in place when the root is ``/`` (no resolving under a root, the common case), the
environment is this process's, and in-process libraries are imported here. Commands and probes
run as child processes under a time budget, which is :mod:`accelkit.host._processes`' job.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any, Optional, Union

from accelkit.host._base import CommandResult, Host, ProbeEnv, ProbeFunction
from accelkit.host._processes import run_command, run_probe

__all__ = ["LocalHost"]


class LocalHost(Host):
    """The machine this process runs on."""

    def __init__(self, root: Union[str, os.PathLike[str]] = "/") -> None:
        super().__init__(root)

    def _local(self, path: str) -> Optional[str]:
        if self._root_text == "/":
            if not path.startswith("/"):
                raise ValueError(f"host paths are absolute, got {path!r}")
            return path
        return super()._local(path)

    def realpath(self, path: str) -> Optional[str]:
        if self._root_text == "/":
            return os.path.realpath(path)
        return super().realpath(path)

    def readlink(self, path: str) -> Optional[str]:
        if self._root_text == "/":
            try:
                return os.readlink(path)
            except OSError:
                return None
        return super().readlink(path)

    @property
    def env(self) -> Mapping[str, str]:
        return os.environ

    def run(
        self,
        argv: Sequence[str],
        timeout: Optional[float] = None,
        env: Optional[ProbeEnv] = None,
    ) -> CommandResult:
        return run_command(argv, timeout, env)

    def import_module(self, name: str) -> ModuleType:
        return importlib.import_module(name)

    def has_library(self, name: str) -> bool:
        """Whether the top-level package of ``name`` is on this process's path (the path a
        probe process gets); a dotted name's parents are never imported to find out."""
        top = name.partition(".")[0]
        try:
            return importlib.util.find_spec(top) is not None
        except (ImportError, ValueError):  # a broken finder or a top with a None __spec__
            return True

    def probe(
        self,
        function: ProbeFunction,
        *args: Any,
        timeout: Optional[float] = None,
        env: Optional[ProbeEnv] = None,
    ) -> Any:
        return run_probe(function, args, timeout, env)
