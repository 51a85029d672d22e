"""Fixed-point resource quantities.

Quantities are held as integers of 1e-4 so that ten shares of 0.1 or three of 1/3 add up exactly
and a release always restores what an acquire took. Floats appear only at the edges (requests in,
``available()`` out).
"""

from __future__ import annotations

import math
from numbers import Real

from .errors import InvalidRequest

__all__ = ["SNAP", "UNIT", "from_units", "to_units"]

UNIT = 10_000
"""Units in one whole device or resource: the resolution is 1e-4."""

SNAP = 1e-9
"""A value this close to a multiple of 1e-4 rounds to it; anything else is floored."""


def to_units(value: object, *, what: str = "quantity") -> int:
    """Convert a requested quantity to integer units, or raise :class:`InvalidRequest`.

    0.57 is 5700 units (it is within 1e-9 of it), 1/3 is 3333 units (floored, as Ray does), and a
    quantity above 1 must be whole. ``what`` names the quantity in the error message.
    """
    if isinstance(value, bool) or not isinstance(value, Real):
        raise InvalidRequest(f"{what} must be a number, got {value!r}")
    number = float(value)
    if math.isnan(number) or math.isinf(number):
        raise InvalidRequest(f"{what} must be finite, got {value!r}")
    if number < 0:
        raise InvalidRequest(f"{what} must not be negative, got {value!r}")
    scaled = number * UNIT
    nearest = round(scaled)
    units = nearest if abs(number - nearest / UNIT) <= SNAP else math.floor(scaled)
    if units == 0 and number != 0:
        raise InvalidRequest(f"{what} {value!r} is below the smallest quantity, 0.0001")
    if units > UNIT and units % UNIT:
        raise InvalidRequest(
            f"{what} {value!r} is above 1 and not whole: "
            "ask for a whole number, or a fraction below 1"
        )
    return units


def from_units(units: int) -> float:
    """The float a scheduler shows for ``units`` (e.g. in ``available()``)."""
    return units / UNIT
