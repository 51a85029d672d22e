"""Lazy exports for package faces: a name is imported from its module on first use, so
importing the package itself imports nothing behind it."""

from __future__ import annotations

import importlib

TYPE_CHECKING = False
"""``typing.TYPE_CHECKING`` without importing ``typing``: ``import accelkit`` stays near a bare
interpreter's start (mypy reads it as true, ``always_true`` in pyproject.toml)."""
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, Callable

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, names: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: ``names`` maps each public name to the
    submodule (relative to ``package``) that defines it."""
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{module}", package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(names))

    return __getattr__, __dir__
