"""What discovery reports about each plugin, and the switches operators set in the environment."""

from __future__ import annotations

import dataclasses
import sys
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Callable, Literal, NamedTuple, Optional

from accelkit._settings import flag, names
from accelkit.errors import PluginWarning

if TYPE_CHECKING:
    import pluggy

    from accelkit.manager import AcceleratorManager

__all__ = [
    "AUTOLOAD_OFF_VAR",
    "DISABLE_VAR",
    "REQUIRE_VAR",
    "TRACE_VAR",
    "PluginInfo",
    "PluginWarning",
    "Settings",
    "Status",
    "autoload_enabled",
]

DISABLE_VAR = "ACCELKIT_DISABLE_PLUGINS"
AUTOLOAD_OFF_VAR = "ACCELKIT_DISABLE_PLUGIN_AUTOLOAD"
REQUIRE_VAR = "ACCELKIT_REQUIRE_PLUGINS"
TRACE_VAR = "ACCELKIT_TRACE_PLUGINS"

Status = Literal["ok", "error", "disabled", "replaced"]
"""``ok``: in use. ``error``: failed and skipped (see ``error``). ``disabled``: blocked by
``ACCELKIT_DISABLE_PLUGINS``. ``replaced``: a built-in whose family a vendor plugin took over."""


@dataclass(frozen=True)
class PluginInfo:
    """One plugin as discovery saw it: where it came from and whether it is in use.

    ``origin`` is ``"builtin"``, ``"entry-point"`` or ``"given"`` (handed to a
    :class:`~accelkit.Registry` by its caller). ``families`` are the families the plugin
    provides, or, when it is not in use, the ones it tried to provide (empty if it failed before
    saying). ``error`` explains any status but ``"ok"``. ``problems`` are the errors of its
    families' latest detection with this registry: a command, probe or library call cut at its
    budget, a probe process that died, a ``detect()`` that raised or did not finish in time;
    and the faults of its other hooks' latest calls (one that raised or answered nonsense).
    ``notes`` are what a plugin in use should change (a contract version 1 plugin: where each of
    its old attributes moved).
    """

    name: str
    module: str
    origin: str
    dist: Optional[str]
    version: Optional[str]
    status: Status
    error: Optional[str] = None
    families: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def describe(self) -> str:
        """``plugin 'acme' (accelkit-example 0.1.0)``: how messages name a plugin; one handed
        to a registry by its caller is named by its module (it may belong to no distribution)."""
        if self.origin == "given" and self.dist is None:
            return f"plugin {self.name!r} (module {self.module}, given to the registry)"
        built = ", built-in" if self.origin == "builtin" else ""
        return f"plugin {self.name!r} ({self.dist or '?'} {self.version or '?'}{built})"

    def not_in_use(self) -> str:
        """Why the plugin is not in use, naming it: for messages."""
        return f"{self.describe()} is not in use ({self.status}): {self.error}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``accelkit plugins --json``)."""
        data = asdict(self)
        data["families"] = list(self.families)
        data["problems"] = list(self.problems)
        data["notes"] = list(self.notes)
        return data


def autoload_enabled(env: Mapping[str, str]) -> bool:
    """Whether third-party entry points load (``ACCELKIT_DISABLE_PLUGIN_AUTOLOAD`` off)."""
    return not flag(env, AUTOLOAD_OFF_VAR)


class Settings(NamedTuple):
    """The operator's switches, read once when a registry loads."""

    disabled: frozenset[str]
    required: tuple[str, ...]
    autoload: bool
    trace: bool

    @classmethod
    def from_env(cls, env: Mapping[str, str], autoload: bool) -> Settings:
        """``autoload`` is the caller's wish; ``ACCELKIT_DISABLE_PLUGIN_AUTOLOAD`` can only
        turn it off."""
        return cls(
            disabled=frozenset(names(env, DISABLE_VAR)),
            required=names(env, REQUIRE_VAR),
            autoload=autoload and autoload_enabled(env),
            trace=flag(env, TRACE_VAR),
        )


class LoadedPlugin:
    """A plugin while it is loaded: its record, the object pluggy holds, and its managers."""

    __slots__ = ("impls", "info", "load", "managers", "obj")

    def __init__(self, info: PluginInfo, load: Callable[[], object]) -> None:
        self.info = info
        self.load = load
        self.obj: object = None
        self.impls: dict[str, pluggy.HookImpl] = {}
        self.managers: list[AcceleratorManager] = []

    def fail(self, status: Status, error: str) -> None:
        """Take the plugin out of use, saying why."""
        self.info = dataclasses.replace(self.info, status=status, error=error)


def warn(message: str) -> None:
    """Warn with the location of the first caller outside accelkit: the caller's line that
    loaded the plugins (``detect_node()``, ``record_snapshot()``), not accelkit's own."""
    frame, level = sys._getframe(1), 2
    while frame.f_back is not None and _in_accelkit(frame.f_globals.get("__name__", "")):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, PluginWarning, stacklevel=level)


def _in_accelkit(module: str) -> bool:
    return module == "accelkit" or module.startswith("accelkit.")
