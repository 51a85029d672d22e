"""Resource amounts as the engines' text formats write them."""

from __future__ import annotations

from typing import Union

__all__ = ["number"]


def number(value: float) -> Union[int, float]:
    """8.0 -> 8 (whole amounts as integers, as every engine's examples write them); 0.5 stays."""
    return int(value) if float(value).is_integer() else float(value)
