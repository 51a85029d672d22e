"""Plugin discovery (minimal placeholder: built-ins only; the full loader replaces this)."""

from __future__ import annotations

import importlib
from typing import Optional

from .manager import AcceleratorManager

BUILTIN_PLUGINS = (
    "accelkit_plugins.nvidia",
    "accelkit_plugins.amd",
    "accelkit_plugins.intel",
    "accelkit_plugins.neuron",
    "accelkit_plugins.tpu",
    "accelkit_plugins.gaudi",
    "accelkit_plugins.ascend",
)

_cache: Optional[list[AcceleratorManager]] = None


def managers() -> list[AcceleratorManager]:
    global _cache
    if _cache is None:
        found: list[AcceleratorManager] = []
        for name in BUILTIN_PLUGINS:
            module = importlib.import_module(name)
            found.extend(module.accelkit_register_managers())
        _cache = found
    return list(_cache)


def get_manager(name: str) -> AcceleratorManager:
    for manager in managers():
        if manager.name == name:
            return manager
    raise KeyError(f"no accelerator family {name!r}; known: {[m.name for m in managers()]}")


def reset() -> None:
    global _cache
    _cache = None
