"""Environments and hosts that record what a manager asks of them.

Snapshots record only the variables a family declares in ``env_vars_read``, so a manager that
reads another one behaves differently on a replayed node than on the real one. Reading through
these wrappers shows exactly which names were asked for, and which functions were probed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Optional

from accelkit.host import Host, HostView, ProbeEnv
from accelkit.host._base import ProbeFunction

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


class WatchedHost(HostView):
    """``host`` with its environment and its probes watched; everything is passed on unchanged."""

    def __init__(self, host: Host) -> None:
        super().__init__(host, host.env)
        self.watched_env = WatchedEnv(host.env)
        self.probes: list[tuple[ProbeFunction, tuple[Any, ...]]] = []

    @property
    def env(self) -> Mapping[str, str]:
        return self.watched_env

    def probe(
        self,
        function: ProbeFunction,
        *args: Any,
        timeout: Optional[float] = None,
        env: Optional[ProbeEnv] = None,
    ) -> Any:
        self.probes.append((function, args))
        return super().probe(function, *args, timeout=timeout, env=env)
