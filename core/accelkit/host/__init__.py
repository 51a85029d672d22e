"""The machine as a manager sees it: files under a root, declared variables, vendor commands
and libraries under a time budget, and snapshots replayed.
"""

from __future__ import annotations

from accelkit._lazy import lazy_exports

TYPE_CHECKING = False

_LAZY = {
    "CommandResult": "_host",
    "CommandSpec": "_host",
    "FakeHost": "_host",
    "Host": "_host",
    "HostView": "_host",
    "LocalHost": "_host",
    "ProbeEnv": "_host",
    "ProbeError": "_host",
    "DEFAULT_COMMAND_TIMEOUT": "_host",
    "DEFAULT_PROBE_TIMEOUT": "_host",
}

__all__ = list(_LAZY)

if TYPE_CHECKING:
    from accelkit.host._host import DEFAULT_COMMAND_TIMEOUT as DEFAULT_COMMAND_TIMEOUT
    from accelkit.host._host import DEFAULT_PROBE_TIMEOUT as DEFAULT_PROBE_TIMEOUT
    from accelkit.host._host import CommandResult as CommandResult
    from accelkit.host._host import CommandSpec as CommandSpec
    from accelkit.host._host import FakeHost as FakeHost
    from accelkit.host._host import Host as Host
    from accelkit.host._host import HostView as HostView
    from accelkit.host._host import LocalHost as LocalHost
    from accelkit.host._host import ProbeEnv as ProbeEnv
    from accelkit.host._host import ProbeError as ProbeError

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
