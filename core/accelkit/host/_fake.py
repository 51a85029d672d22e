"""``FakeHost``: a host made of exactly what it is given, and nothing of the real machine.

Every plugin test, the conformance kit and snapshot replay (:mod:`accelkit.host._replay`) build
one: files under a directory, the variables, canned command answers (:data:`CommandSpec`) and
importable libraries, each given by the caller, so detection can be run without the hardware.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any, Callable, Optional, Union

from accelkit.errors import ProbeError
from accelkit.host._base import CommandResult, Host, ProbeEnv, ProbeFunction, resolve_under

__all__ = ["CommandSpec", "FakeHost"]

CommandSpec = Union[
    "tuple[int, str]",
    "tuple[int, str, str]",
    BaseException,
    "type[BaseException]",
    Callable[[Sequence[str]], Any],
]
"""How a :class:`FakeHost` answers a command: ``(rc, stdout)``, ``(rc, stdout, stderr)``, an
exception (instance or class) to raise, or a callable taking argv and returning one of those."""


class FakeHost(Host):
    """A host made of exactly what it is given, and nothing of the real machine.

    ``root``: a directory standing for ``/`` (None: no files at all). ``env``: the variables.
    ``commands``: keyed by program name (``"nvidia-smi"``) or by an argv prefix tuple
    (``("neuron-ls", "--json-output")``, longest prefix wins), valued as :data:`CommandSpec`.
    ``modules``: importable libraries by name; a value may be an exception to raise on import.
    ``runs`` records every argv run and ``run_envs`` the ``env`` each was run with, and
    ``probe_envs`` the ``env`` of every probe (which runs here, in this process, whose
    environment it leaves alone), for tests that check what was asked. The tree under ``root``
    is taken as fixed once read: each directory's symlinks are resolved once.
    """

    def __init__(
        self,
        root: Optional[Union[str, os.PathLike[str]]] = None,
        env: Optional[Mapping[str, str]] = None,
        commands: Optional[Mapping[Union[str, tuple[str, ...]], CommandSpec]] = None,
        modules: Optional[Mapping[str, Any]] = None,
    ) -> None:
        super().__init__(root)
        self._env = dict(env or {})
        self._commands: dict[tuple[str, ...], CommandSpec] = {}
        for key, spec in (commands or {}).items():
            prefix = (key,) if isinstance(key, str) else tuple(key)
            if not prefix:
                raise ValueError("a FakeHost command key needs at least the program name")
            self._commands[prefix] = spec
        self._modules = dict(modules or {})
        self.runs: list[tuple[str, ...]] = []
        self.run_envs: list[dict[str, Optional[str]]] = []
        self.probe_envs: list[dict[str, Optional[str]]] = []
        self._resolved: dict[str, Optional[str]] = {}

    def _resolve(self, path: str) -> Optional[str]:
        """As the machine would, each path once and each directory through its own resolution:
        walking every component of every path for symlinks was most of a warm detection."""
        if path in self._resolved:
            return self._resolved[path]
        assert self._root_text is not None
        parent, _, name = path.rstrip("/").rpartition("/")
        if name in ("", ".", "..") or not parent:
            resolved = resolve_under(self._root_text, path)
        else:
            base = self._resolve(parent)
            candidate = None if base is None else posixpath.join(base, name)
            if candidate is not None and os.path.islink(self._local_text(candidate)):
                candidate = resolve_under(self._root_text, candidate)
            resolved = candidate
        self._resolved[path] = resolved
        return resolved

    @property
    def env(self) -> Mapping[str, str]:
        return self._env

    def run(
        self,
        argv: Sequence[str],
        timeout: Optional[float] = None,
        env: Optional[ProbeEnv] = None,
    ) -> CommandResult:
        """The answer given for ``argv``; ``env`` is recorded in :attr:`run_envs` (the canned
        answer is the same whatever it holds)."""
        argv = tuple(argv)
        if not argv:
            raise ValueError("run() needs a program")
        self.runs.append(argv)
        self.run_envs.append(dict(env or {}))
        matches = [p for p in self._commands if argv[: len(p)] == p]
        if not matches:
            raise FileNotFoundError(f"{argv[0]}: not found on PATH")
        spec: Any = self._commands[max(matches, key=len)]
        if callable(spec) and not isinstance(spec, type):
            spec = spec(argv)
        if isinstance(spec, BaseException) or (
            isinstance(spec, type) and issubclass(spec, BaseException)
        ):
            raise spec
        if isinstance(spec, CommandResult):
            return spec
        if isinstance(spec, tuple) and len(spec) in (2, 3):
            return CommandResult(*spec)
        raise TypeError(f"FakeHost command {argv!r}: cannot answer with {spec!r}")

    def import_module(self, name: str) -> ModuleType:
        if name not in self._modules:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        module = self._modules[name]
        if isinstance(module, BaseException) or (
            isinstance(module, type) and issubclass(module, BaseException)
        ):
            raise module
        return module  # type: ignore[no-any-return]

    def has_library(self, name: str) -> bool:
        """Whether ``name`` is among the given ``modules`` (a FakeHost has nothing else)."""
        return name in self._modules

    def probe(
        self,
        function: ProbeFunction,
        *args: Any,
        timeout: Optional[float] = None,
        env: Optional[ProbeEnv] = None,
    ) -> Any:
        """As :meth:`LocalHost.probe`: ``ImportError`` only when importing a library fails (one
        raised inside a library call is a :class:`ProbeError`, as in a real probe process).
        ``env`` is recorded in :attr:`probe_envs`; this process's environment is left alone."""
        self.probe_envs.append(dict(env or {}))

        def load(name: str) -> ModuleType:
            try:
                return self.import_module(name)
            except ImportError as exc:
                raise _LibraryMissing(exc) from exc

        try:
            return function(load, *args)
        except _LibraryMissing as missing:
            raise missing.error from None
        except TimeoutError:
            raise
        except (Exception, SystemExit) as exc:
            raise ProbeError(f"{type(exc).__name__}: {exc}") from exc


class _LibraryMissing(Exception):
    """A probe's import of its library failed (carried past the probe function's own code)."""

    def __init__(self, error: ImportError) -> None:
        super().__init__(str(error))
        self.error = error
