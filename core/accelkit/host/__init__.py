"""The machine as a manager sees it: files under a root, declared variables, vendor commands
and libraries under a time budget, and snapshots replayed.
"""

from __future__ import annotations

from accelkit._lazy import lazy_exports
from accelkit.errors import ProbeError

TYPE_CHECKING = False

_LAZY = {
    "CommandResult": "_base",
    "Host": "_base",
    "HostView": "_base",
    "ProbeEnv": "_base",
    "LocalHost": "_local",
    "DEFAULT_COMMAND_TIMEOUT": "_processes",
    "DEFAULT_PROBE_TIMEOUT": "_processes",
    "CommandSpec": "_fake",
    "FakeHost": "_fake",
    "load_snapshot": "_replay",
}

__all__ = [*_LAZY, "ProbeError"]

if TYPE_CHECKING:
    from accelkit.host._base import CommandResult as CommandResult
    from accelkit.host._base import Host as Host
    from accelkit.host._base import HostView as HostView
    from accelkit.host._base import ProbeEnv as ProbeEnv
    from accelkit.host._fake import CommandSpec as CommandSpec
    from accelkit.host._fake import FakeHost as FakeHost
    from accelkit.host._local import LocalHost as LocalHost
    from accelkit.host._processes import DEFAULT_COMMAND_TIMEOUT as DEFAULT_COMMAND_TIMEOUT
    from accelkit.host._processes import DEFAULT_PROBE_TIMEOUT as DEFAULT_PROBE_TIMEOUT
    from accelkit.host._replay import load_snapshot as load_snapshot

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
