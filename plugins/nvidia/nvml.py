"""NVML calls that some GPUs answer with "not supported": asked without failing the layer."""

from __future__ import annotations

from typing import Any, Callable, Union

__all__ = ["optional_call"]

ExceptionTypes = Union["type[BaseException]", "tuple[type[BaseException], ...]"]
"""What ``except`` takes: one exception class or a tuple of them."""


def optional_call(
    function: Callable[..., Any], *args: Any, errors: ExceptionTypes = Exception
) -> Any:
    """``function(*args)``, or None when it raises one of ``errors``: for library calls that
    answer "not supported" on some devices (NVML's MIG mode on a GPU without MIG)."""
    try:
        return function(*args)
    except errors:
        return None
