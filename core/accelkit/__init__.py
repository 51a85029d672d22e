"""accelkit: vendor-neutral accelerator detection, naming, allocation and visibility.

``import accelkit`` is cheap: it imports no vendor library, scans no entry points and loads no
plugin. Every public name below is resolved on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_LAZY = {
    "hookimpl": "hookspecs",
    "hookspec": "hookspecs",
    "API_VERSION": "manager",
    "ACCELERATOR_TYPE_PREFIX": "manager",
    "AcceleratorManager": "manager",
    "Device": "device",
    "Host": "host",
    "LocalHost": "host",
    "FakeHost": "host",
    "CommandResult": "host",
    "ProbeError": "host",
    "AccelkitError": "errors",
    "InvalidRequest": "errors",
    "Unsatisfiable": "errors",
    "ConfigurationError": "errors",
    "PluginError": "errors",
    "Diagnostic": "diagnostics",
    "note": "diagnostics",
    "Placement": "placement",
    "LOWEST_FREE": "placement",
    "ALIGNED_BLOCKS": "placement",
    "CONTIGUOUS": "placement",
    "managers": "registry",
    "get_manager": "registry",
    "plugin_report": "registry",
    "Node": "node",
    "detect_node": "node",
    "validate_request": "request",
    "Allocator": "allocator",
    "Grant": "grant",
    "visible_ids": "runtime",
}

__all__ = ["__version__", *_LAZY]

if TYPE_CHECKING:
    from .allocator import (
        Allocator as Allocator,
    )
    from .device import (
        Device as Device,
    )
    from .diagnostics import (
        Diagnostic as Diagnostic,
    )
    from .diagnostics import (
        note as note,
    )
    from .errors import (
        AccelkitError as AccelkitError,
    )
    from .errors import (
        ConfigurationError as ConfigurationError,
    )
    from .errors import (
        InvalidRequest as InvalidRequest,
    )
    from .errors import (
        PluginError as PluginError,
    )
    from .errors import (
        Unsatisfiable as Unsatisfiable,
    )
    from .grant import (
        Grant as Grant,
    )
    from .hookspecs import (
        hookimpl as hookimpl,
    )
    from .hookspecs import (
        hookspec as hookspec,
    )
    from .host import (
        CommandResult as CommandResult,
    )
    from .host import (
        FakeHost as FakeHost,
    )
    from .host import (
        Host as Host,
    )
    from .host import (
        LocalHost as LocalHost,
    )
    from .host import (
        ProbeError as ProbeError,
    )
    from .manager import (
        ACCELERATOR_TYPE_PREFIX as ACCELERATOR_TYPE_PREFIX,
    )
    from .manager import (
        API_VERSION as API_VERSION,
    )
    from .manager import (
        AcceleratorManager as AcceleratorManager,
    )
    from .node import (
        Node as Node,
    )
    from .node import (
        detect_node as detect_node,
    )
    from .placement import (
        ALIGNED_BLOCKS as ALIGNED_BLOCKS,
    )
    from .placement import (
        CONTIGUOUS as CONTIGUOUS,
    )
    from .placement import (
        LOWEST_FREE as LOWEST_FREE,
    )
    from .placement import (
        Placement as Placement,
    )
    from .registry import (
        get_manager as get_manager,
    )
    from .registry import (
        managers as managers,
    )
    from .registry import (
        plugin_report as plugin_report,
    )
    from .request import (
        validate_request as validate_request,
    )
    from .runtime import (
        visible_ids as visible_ids,
    )


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'accelkit' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
