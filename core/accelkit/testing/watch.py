"""Environments and hosts that record what a manager asks of them.

Snapshots record only the variables a family declares in ``env_vars_read``, so a manager that
reads another one behaves differently on a replayed node than on the real one. Reading through
these wrappers shows exactly which names were asked for, and which functions were probed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from types import ModuleType
from typing import Any, Optional

from ..host import CommandResult, Host, ProbeFunction

__all__ = ["WatchedEnv", "WatchedHost"]


class WatchedEnv(Mapping[str, str]):
    """A read-only environment that remembers every name looked up.

    Listing it is allowed and not recorded: ``set(env) & {...}`` is a fine way to test for
    declared variables, and what a manager does with a listing cannot be told from here.
    """

    def __init__(self, env: Mapping[str, str]) -> None:
        self._env = dict(env)
        self.names: set[str] = set()

    def __getitem__(self, name: str) -> str:
        self.names.add(name)
        return self._env[name]

    def __contains__(self, name: object) -> bool:
        if isinstance(name, str):
            self.names.add(name)
        return name in self._env

    def __iter__(self) -> Iterator[str]:
        return iter(self._env)

    def __len__(self) -> int:
        return len(self._env)


class WatchedHost(Host):
    """``host`` with its environment and its probes watched; everything is passed on unchanged."""

    def __init__(self, host: Host) -> None:
        super().__init__(host.root)
        self._host = host
        self.watched_env = WatchedEnv(host.env)
        self.probes: list[tuple[ProbeFunction, tuple[Any, ...]]] = []

    @property
    def env(self) -> Mapping[str, str]:
        return self.watched_env

    def read_text(self, path: str) -> Optional[str]:
        return self._host.read_text(path)

    def exists(self, path: str) -> bool:
        return self._host.exists(path)

    def is_dir(self, path: str) -> bool:
        return self._host.is_dir(path)

    def listdir(self, path: str) -> list[str]:
        return self._host.listdir(path)

    def readlink(self, path: str) -> Optional[str]:
        return self._host.readlink(path)

    def realpath(self, path: str) -> Optional[str]:
        return self._host.realpath(path)

    def glob(self, pattern: str) -> list[str]:
        return self._host.glob(pattern)

    def run(self, argv: Sequence[str], timeout: Optional[float] = None) -> CommandResult:
        return self._host.run(argv, timeout=timeout)

    def import_module(self, name: str) -> ModuleType:
        return self._host.import_module(name)

    def probe(self, function: ProbeFunction, *args: Any, timeout: Optional[float] = None) -> Any:
        self.probes.append((function, args))
        return self._host.probe(function, *args, timeout=timeout)
