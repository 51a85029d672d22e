"""accelkit: vendor-neutral accelerator detection, naming, allocation and visibility.

``import accelkit`` is cheap: it imports no vendor library, scans no entry points and loads no
plugin. Every public name below is resolved on first use (``accelkit.__version__`` too).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_exports

_LAZY = {
    "hookimpl": "hookspecs",
    "API_VERSION": "manager",
    "ACCELERATOR_TYPE_PREFIX": "manager",
    "AcceleratorManager": "manager",
    "FamilyPolicy": "policy",
    "Device": "device",
    "Host": "host",
    "LocalHost": "host",
    "FakeHost": "host",
    "CommandResult": "host",
    "ProbeError": "host",
    "load_snapshot": "snapshot",
    "AccelkitError": "errors",
    "InvalidRequest": "errors",
    "Unsatisfiable": "errors",
    "LedgerError": "errors",
    "WorkerCrashed": "errors",
    "ConfigurationError": "errors",
    "PluginError": "errors",
    "PluginWarning": "errors",
    "Diagnostic": "diagnostics",
    "note": "diagnostics",
    "Placement": "placement",
    "LOWEST_FREE": "placement",
    "ALIGNED_BLOCKS": "placement",
    "CONTIGUOUS": "placement",
    "Registry": "registry",
    "PluginInfo": "registry",
    "UnknownFamily": "registry",
    "managers": "registry",
    "get_manager": "registry",
    "plugin_report": "registry",
    "Node": "node",
    "detect_node": "pipeline",
    "validate_request": "request",
    "Allocator": "allocator",
    "Grant": "grant",
    "visible_ids": "runtime",
    "__version__": "_version",
}

__all__ = [name for name in _LAZY if name != "__version__"]

if TYPE_CHECKING:
    from ._version import __version__ as __version__
    from .allocator import Allocator as Allocator
    from .device import Device as Device
    from .diagnostics import Diagnostic as Diagnostic
    from .diagnostics import note as note
    from .errors import AccelkitError as AccelkitError
    from .errors import ConfigurationError as ConfigurationError
    from .errors import InvalidRequest as InvalidRequest
    from .errors import LedgerError as LedgerError
    from .errors import PluginError as PluginError
    from .errors import PluginWarning as PluginWarning
    from .errors import Unsatisfiable as Unsatisfiable
    from .errors import WorkerCrashed as WorkerCrashed
    from .grant import Grant as Grant
    from .hookspecs import hookimpl as hookimpl
    from .host import CommandResult as CommandResult
    from .host import FakeHost as FakeHost
    from .host import Host as Host
    from .host import LocalHost as LocalHost
    from .host import ProbeError as ProbeError
    from .manager import ACCELERATOR_TYPE_PREFIX as ACCELERATOR_TYPE_PREFIX
    from .manager import API_VERSION as API_VERSION
    from .manager import AcceleratorManager as AcceleratorManager
    from .node import Node as Node
    from .pipeline import detect_node as detect_node
    from .placement import ALIGNED_BLOCKS as ALIGNED_BLOCKS
    from .placement import CONTIGUOUS as CONTIGUOUS
    from .placement import LOWEST_FREE as LOWEST_FREE
    from .placement import Placement as Placement
    from .policy import FamilyPolicy as FamilyPolicy
    from .registry import PluginInfo as PluginInfo
    from .registry import Registry as Registry
    from .registry import UnknownFamily as UnknownFamily
    from .registry import get_manager as get_manager
    from .registry import managers as managers
    from .registry import plugin_report as plugin_report
    from .request import validate_request as validate_request
    from .runtime import visible_ids as visible_ids
    from .snapshot import load_snapshot as load_snapshot

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
