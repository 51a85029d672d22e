"""accelkit: vendor-neutral accelerator detection, naming, allocation and visibility.

``import accelkit`` is cheap: it imports no vendor library, scans no entry points and loads no
plugin. Every public name below is resolved on first use (``accelkit.__version__`` too).
"""

from __future__ import annotations

from accelkit._lazy import lazy_exports

TYPE_CHECKING = False
"""``typing.TYPE_CHECKING`` without importing ``typing`` (with ``re`` and ``functools`` behind
it, most of a bare interpreter's start again); mypy reads it as true (``always_true``)."""

_LAZY = {
    "hookimpl": "hookspecs",
    "API_VERSION": "manager",
    "ACCELERATOR_TYPE_PREFIX": "manager",
    "AcceleratorManager": "manager",
    "Scheduling": "manager",
    "Frameworks": "manager",
    "FamilyPolicy": "policy",
    "Device": "device",
    "Host": "host",
    "LocalHost": "host",
    "FakeHost": "host",
    "CommandResult": "host",
    "ProbeError": "errors",
    "load_snapshot": "host",
    "AccelkitError": "errors",
    "InvalidData": "errors",
    "InvalidRequest": "errors",
    "Unsatisfiable": "errors",
    "LedgerError": "errors",
    "WorkerCrashed": "errors",
    "ConfigurationError": "errors",
    "PluginError": "errors",
    "PluginWarning": "errors",
    "Diagnostic": "diagnostics",
    "note": "diagnostics",
    "Placement": "policy",
    "LOWEST_FREE": "policy",
    "ALIGNED_BLOCKS": "policy",
    "CONTIGUOUS": "policy",
    "Registry": "registry",
    "PluginInfo": "registry",
    "UnknownFamily": "errors",
    "managers": "registry",
    "get_manager": "registry",
    "plugin_report": "registry",
    "Node": "node",
    "detect_node": "node",
    "validate_request": "schedule",
    "Allocator": "schedule",
    "Grant": "schedule",
    "visible_ids": "runtime",
    "__version__": "_version",
}

__all__ = [name for name in _LAZY if name != "__version__"]

if TYPE_CHECKING:
    from accelkit._version import __version__ as __version__
    from accelkit.device import Device as Device
    from accelkit.diagnostics import Diagnostic as Diagnostic
    from accelkit.diagnostics import note as note
    from accelkit.errors import AccelkitError as AccelkitError
    from accelkit.errors import ConfigurationError as ConfigurationError
    from accelkit.errors import InvalidData as InvalidData
    from accelkit.errors import InvalidRequest as InvalidRequest
    from accelkit.errors import LedgerError as LedgerError
    from accelkit.errors import PluginError as PluginError
    from accelkit.errors import PluginWarning as PluginWarning
    from accelkit.errors import ProbeError as ProbeError
    from accelkit.errors import UnknownFamily as UnknownFamily
    from accelkit.errors import Unsatisfiable as Unsatisfiable
    from accelkit.errors import WorkerCrashed as WorkerCrashed
    from accelkit.hookspecs import hookimpl as hookimpl
    from accelkit.host import CommandResult as CommandResult
    from accelkit.host import FakeHost as FakeHost
    from accelkit.host import Host as Host
    from accelkit.host import LocalHost as LocalHost
    from accelkit.host import load_snapshot as load_snapshot
    from accelkit.manager import ACCELERATOR_TYPE_PREFIX as ACCELERATOR_TYPE_PREFIX
    from accelkit.manager import API_VERSION as API_VERSION
    from accelkit.manager import AcceleratorManager as AcceleratorManager
    from accelkit.manager import Frameworks as Frameworks
    from accelkit.manager import Scheduling as Scheduling
    from accelkit.node import Node as Node
    from accelkit.node import detect_node as detect_node
    from accelkit.policy import ALIGNED_BLOCKS as ALIGNED_BLOCKS
    from accelkit.policy import CONTIGUOUS as CONTIGUOUS
    from accelkit.policy import LOWEST_FREE as LOWEST_FREE
    from accelkit.policy import FamilyPolicy as FamilyPolicy
    from accelkit.policy import Placement as Placement
    from accelkit.registry import PluginInfo as PluginInfo
    from accelkit.registry import Registry as Registry
    from accelkit.registry import get_manager as get_manager
    from accelkit.registry import managers as managers
    from accelkit.registry import plugin_report as plugin_report
    from accelkit.runtime import visible_ids as visible_ids
    from accelkit.schedule import Allocator as Allocator
    from accelkit.schedule import Grant as Grant
    from accelkit.schedule import validate_request as validate_request

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
