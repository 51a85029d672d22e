"""Run in a fresh interpreter by the hygiene checks (through the one probe mechanism,
:meth:`accelkit.LocalHost.probe`): which modules importing a plugin pulls in. It imports nothing
itself, so what it reports is what the plugin costs."""

from __future__ import annotations

from typing import Any, Callable


def new_modules(import_module: Callable[[str], Any], modules: list[str]) -> list[str]:
    """The modules that importing ``modules`` adds to ``sys.modules``, sorted."""
    import sys

    before = set(sys.modules)
    for name in modules:
        import_module(name)
    return sorted(set(sys.modules) - before)
