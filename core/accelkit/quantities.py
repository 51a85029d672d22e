"""Fixed-point resource quantities.

Quantities are held as integers of 1e-4 so that ten shares of 0.1 or three of 1/3 add up exactly
and a release always restores what an acquire took. Floats appear only at the edges (requests in,
``available()`` out).

The rule (DESIGN.md): a value within 1e-9 of a multiple of 1e-4 rounds to it, any other value is
floored (0.57 is 5700 units although ``0.57 * 1e4`` is 5699.999..., 1/3 is 3333 units, as in
Ray); a non-zero value below 1e-4, a negative, NaN, infinite or non-numeric value is refused; above
1, only whole numbers. Integers (and whole ``Fraction`` or ``Decimal`` values) convert exactly up
to :data:`MAX_QUANTITY`: a memory resource of ``10**12 + 1`` bytes is exactly that many units of
1e-4 times 1e4. Anything larger is refused before any arithmetic, so no value (``10**400``,
``Decimal("1e999999999")``) costs more than a comparison.
"""

from __future__ import annotations

import math
import sys
from numbers import Rational, Real
from typing import TYPE_CHECKING, Union

from accelkit._shown import shown
from accelkit.errors import InvalidData, InvalidRequest

if TYPE_CHECKING:
    from decimal import Decimal

    from typing_extensions import TypeGuard

__all__ = [
    "MAX_QUANTITY",
    "REQUEST_ADVICE",
    "SNAP",
    "UNIT",
    "as_float",
    "from_units",
    "json_amount",
    "shown_quantity",
    "to_units",
]

UNIT = 10_000
"""Units in one whole device or resource: the resolution is 1e-4."""

SNAP = 1e-9
"""A value this close to a multiple of 1e-4 rounds to it; anything else is floored."""

MAX_QUANTITY = 2**53
"""The largest quantity accepted (about 9e15): the largest whole number a float holds exactly, so
every accepted quantity survives JSON and ``available()`` unchanged (a petabyte of memory fits)."""

REQUEST_ADVICE = "ask for 0 (nothing), a fraction from 0.0001 to 1, or a whole number"
"""What a request may ask, said by every refusal of a quantity that is no amount at all."""


def to_units(value: object, *, what: str = "quantity") -> int:
    """Convert a requested quantity to integer units, or raise :class:`InvalidRequest`.

    0.57 is 5700 units (it is within 1e-9 of it), 1/3 is 3333 units (floored, as Ray does), and a
    quantity above 1 must be whole. ``what`` names the quantity in the error message, which
    also says what was wrong and what would be right.
    """
    number = _number(value, what)
    if isinstance(number, int):
        if number < 0:
            raise InvalidRequest(
                f"{what} {shown_quantity(value)} must not be negative: {REQUEST_ADVICE}"
            )
        return number * UNIT
    if math.isnan(number) or math.isinf(number):
        raise InvalidRequest(f"{what} {shown_quantity(value)} must be finite: {REQUEST_ADVICE}")
    if number < 0:
        raise InvalidRequest(
            f"{what} {shown_quantity(value)} must not be negative: {REQUEST_ADVICE}"
        )
    whole = round(number)  # an exact int, however large the float
    if abs(number - whole) <= SNAP:
        return whole * UNIT
    if number > 1:
        raise InvalidRequest(
            f"{what} {shown_quantity(value)} is above 1 and not whole: ask for a whole number "
            f"({math.floor(number)} or {math.ceil(number)}), or a fraction below 1"
        )
    scaled = number * UNIT
    nearest = round(scaled)
    units = nearest if abs(number - nearest / UNIT) <= SNAP else math.floor(scaled)
    if units == 0:
        raise InvalidRequest(
            f"{what} {shown_quantity(value)} is below the smallest quantity, 0.0001: ask for 0 "
            "(nothing) or at least 0.0001"
        )
    return units


def as_float(value: object, *, what: str = "quantity") -> float:
    """``value`` as the float an engine that compares floats must be offered for it: 1/3 is
    0.333..., what ``resources={"GPU": 1/3}`` asks, where :func:`to_units` floors it to 0.3333,
    which Dask finds short of 1/3. :class:`InvalidRequest` as :func:`to_units` for what is no
    number."""
    return float(_number(value, what))


def shown_quantity(value: object) -> str:
    """A requested quantity for a message, as a user writes it: ``1/3`` for a fraction (not
    ``Fraction(1, 3)``), ``3`` for a whole float (the command line reads ``GPU=3`` as 3.0);
    anything else, and a value that only claims to be a fraction (a class registered as
    ``numbers.Rational``, whose parts may say anything), as :func:`~accelkit._shown.shown` gives
    it."""
    if isinstance(value, float) and value.is_integer() and abs(value) <= MAX_QUANTITY:
        return str(int(value))
    fractions = sys.modules.get("fractions")  # no Fraction exists before it is imported
    if fractions is not None and isinstance(value, fractions.Fraction):
        return f"{shown(value.numerator)}/{shown(value.denominator)}"
    return shown(value)


def from_units(units: int) -> float:
    """The float a scheduler shows for ``units`` (e.g. in ``available()``)."""
    return units / UNIT


def json_amount(value: object, what: str) -> float:
    """A resource amount or share read back from JSON (node, grant), as a float; ``InvalidData``
    naming ``what`` unless it is a number (not a bool) from 0 to :data:`MAX_QUANTITY`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidData(f"{what} is {shown(value)}, not a number from 0 to {MAX_QUANTITY}")
    if 0 <= value <= MAX_QUANTITY:  # NaN compares false
        return float(value)
    raise InvalidData(f"{what} is {shown(value)}, not a number from 0 to {MAX_QUANTITY}")


def _number(value: object, what: str) -> Union[int, float]:
    """``value`` as an exact int when it is whole and rational, else as a float.

    ``bool`` is refused (``True`` is not "one GPU"); ``Decimal`` is a number although it is not
    a :class:`numbers.Real`.
    """
    if isinstance(value, bool) or not (isinstance(value, Real) or _is_decimal(value)):
        raise InvalidRequest(f"{what} must be a number, got {shown(value)}: {REQUEST_ADVICE}")
    try:
        number = _converted(value, what)
    except InvalidRequest:  # a ValueError too, already saying what is wrong
        raise
    except _UNREADABLE as exc:
        raise InvalidRequest(
            f"{what} {shown(value)} is a {type(value).__name__} that cannot be read as a number "
            f"({type(exc).__name__}: {shown(str(exc), 60)}): ask for an int, a float, a "
            "Fraction or a Decimal"
        ) from None
    finite = isinstance(number, int) or math.isfinite(number)
    if finite and abs(number) > MAX_QUANTITY:  # a claimed number's abs() and float() disagreed
        raise _too_large_error(value, what)
    return number


def _too_large_error(value: object, what: str) -> InvalidRequest:
    return InvalidRequest(
        f"{what} {shown_quantity(value)} is above the largest quantity: ask for at most "
        f"{MAX_QUANTITY}"
    )


_UNREADABLE = (TypeError, ValueError, ArithmeticError, AttributeError)
"""What reading a value that only claims to be a number raises: a class registered as
``numbers.Real`` may lack ``abs()``, ``float()`` or ``denominator``, or answer them with
nonsense (``abs()`` giving text that cannot be compared)."""


def _converted(value: Union[Real, Decimal], what: str) -> Union[int, float]:
    """:func:`_number` for a value that is a number by type; a registered ``numbers.Real``
    without the number protocol raises one of :data:`_UNREADABLE` here."""
    if _too_large(value):
        raise _too_large_error(value, what)
    if _is_decimal(value):
        if value.is_nan():  # a signalling NaN cannot even become a float
            raise InvalidRequest(f"{what} {shown_quantity(value)} must be finite: {REQUEST_ADVICE}")
        if value.is_infinite():
            return float(value)
        from fractions import Fraction

        value = Fraction(value)
    if isinstance(value, Rational) and value.denominator == 1:
        return int(value.numerator)
    return float(value)  # at most MAX_QUANTITY: a float holds it


def _is_decimal(value: object) -> TypeGuard[Decimal]:
    """Whether ``value`` is a ``Decimal``, without importing :mod:`decimal` (with
    :mod:`fractions`, 2 ms of every start): a value can only be one once its module is loaded."""
    decimal = sys.modules.get("decimal")
    return decimal is not None and isinstance(value, decimal.Decimal)


def _too_large(value: Union[Real, Decimal]) -> bool:
    """Whether a finite ``value`` is above :data:`MAX_QUANTITY`, found by comparison alone
    (``abs`` of a ``Decimal`` would round in the context, and may overflow)."""
    if _is_decimal(value):
        return value.is_finite() and value.copy_abs() > MAX_QUANTITY
    if isinstance(value, float):
        return math.isfinite(value) and abs(value) > MAX_QUANTITY
    return bool(abs(value) > MAX_QUANTITY)  # type: ignore[operator]  # numbers.Real compares
