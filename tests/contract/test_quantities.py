"""The fixed-point rule of DESIGN.md, as a table and as properties."""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction
from numbers import Rational, Real
from typing import Any

import pytest
from accelkit import InvalidRequest
from accelkit.quantities import MAX_QUANTITY, UNIT, from_units, shown_quantity, to_units
from hypothesis import given
from hypothesis import strategies as st


@pytest.mark.parametrize(
    ("value", "units"),
    [
        (0, 0),
        (0.0, 0),
        (1, 10_000),
        (0.5, 5_000),
        (0.57, 5_700),  # 0.57 * 1e4 is 5699.999...; within 1e-9 of a unit, so it rounds
        (1 / 3, 3_333),  # floored, as Ray does, and valid
        (0.1 + 0.2, 3_000),
        (0.0001, 1),
        (0.00019, 1),  # floored
        (2, 20_000),
        (8.0, 80_000),
        (Fraction(1, 4), 2_500),
        (Decimal("0.57"), 5_700),  # a number, though not a numbers.Real
        (1 - 1e-12, 10_000),  # near-unit rounds up to one whole device
        (2 + 1e-12, 20_000),  # near-whole above 1 rounds too
        (0.99999, 9_999),  # 1e-5 from a whole is not "near": floored
        (10**12 + 1, (10**12 + 1) * 10_000),  # integers convert exactly, however large
        (float(MAX_QUANTITY), MAX_QUANTITY * 10_000),  # the largest quantity, exactly
        (Fraction(MAX_QUANTITY, 1), MAX_QUANTITY * 10_000),
        (Decimal("9e15"), 9 * 10**19),
    ],
)
def test_valid_quantities_convert_exactly(value: object, units: int) -> None:
    assert to_units(value) == units


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0.00001, "below the smallest quantity"),
        (-1, "negative"),
        (math.nan, "finite"),
        (math.inf, "finite"),
        ("1", "must be a number"),
        (None, "must be a number"),
        (True, "must be a number"),
        (1.5, "above 1 and not whole"),
        (2.0001, "above 1 and not whole"),
        (1.00005, "above 1 and not whole"),  # floors to 1.0000, yet it is above 1 and not whole
        (2.00001, r"above 1 and not whole: ask for a whole number \(2 or 3\)"),
        (Fraction(10**400 + 1, 2), "above the largest quantity"),  # too large for a float
        (1e300, "above the largest quantity"),
        pytest.param(10**5000, "above the largest quantity", id="10**5000"),  # repr would raise
        (Decimal("1e999999999"), "above the largest quantity"),  # Fraction() would never return
        (Decimal("sNaN"), "must be finite"),
        (Decimal("NaN"), "finite"),
        (Decimal("-0.5"), "negative"),
        (1j, "must be a number"),
        ([1], "must be a number"),
    ],
)
def test_invalid_quantities_are_rejected_with_the_value(value: object, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message) as info:
        to_units(value, what="GPU quantity")
    assert "GPU quantity" in str(info.value)
    assert shown_quantity(value) in str(info.value)  # as written, cut short, never raising
    assert "ask for" in str(info.value)  # what would be right, not only what was wrong


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (Fraction(7, 3), "7/3"),  # what `-r GPU=7/3` reads as, said as it was written
        (3.0, "3"),  # the command line reads GPU=3 as a float
        (0.5, "0.5"),
        (3, "3"),
        (float("nan"), "nan"),
        (1e300, "1e+300"),  # whole, but no int a message should spell out
        (Fraction(10**400 + 1, 2), "<an integer of 1329 bits>/2"),
        ("2", "'2'"),
    ],
)
def test_quantities_are_shown_as_a_user_writes_them(value: object, text: str) -> None:
    assert shown_quantity(value) == text


def test_invalid_request_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        to_units(-0.5)


def test_ten_tenths_and_three_thirds_fit_one_device() -> None:
    assert sum(to_units(0.1) for _ in range(10)) == UNIT
    assert 3 * to_units(1 / 3) <= UNIT


@given(st.integers(min_value=1, max_value=UNIT))
def test_every_unit_round_trips(units: int) -> None:
    assert to_units(from_units(units)) == units


@given(st.floats(min_value=0.0001, max_value=1.0, allow_nan=False))
def test_fractions_never_exceed_the_request(value: float) -> None:
    units = to_units(value)
    assert 1 <= units <= UNIT
    assert from_units(units) <= value + 1e-9


@given(st.integers(min_value=1, max_value=10**6), st.floats(min_value=1e-6, max_value=0.99))
def test_above_one_only_whole_numbers(whole: int, part: float) -> None:
    assert to_units(whole) == whole * UNIT
    assert to_units(float(whole)) == whole * UNIT
    with pytest.raises(InvalidRequest, match="not whole"):
        to_units(whole + part)  # 1e-6 is far above float noise at 1e6, and above SNAP


@given(st.floats(min_value=0.0001, max_value=1.0))
def test_units_are_the_nearest_unit_or_the_floor(value: float) -> None:
    units = to_units(value)
    exact = Fraction(value) * UNIT
    assert units == math.floor(exact) or abs(Fraction(units, UNIT) - Fraction(value)) <= 1e-9
    assert units <= exact or abs(Fraction(units, UNIT) - Fraction(value)) <= 1e-9


# -- numbers that only claim to be numbers -------------------------------------------------------
NUMBER_METHODS = ("__abs__", "__float__", "__int__", "__gt__", "__lt__", "__round__")
RATIONAL_PARTS = ("numerator", "denominator")


def _raising(error: type[Exception]) -> Any:
    def method(self: object, *args: object) -> Any:
        raise error("broken")

    return method


def _answering(value: object) -> Any:
    def method(self: object, *args: object) -> Any:
        return value

    return method


BEHAVIOURS = st.one_of(
    st.none(),  # missing
    st.sampled_from([TypeError, ValueError, ArithmeticError, OverflowError]).map(_raising),
    st.sampled_from([None, "1", 1, 2.0, 10**400, float("nan"), object()]).map(_answering),
)


@st.composite
def claimed_numbers(draw: st.DrawFn) -> object:
    """An instance of a class registered as ``numbers.Real`` (or ``Rational``) whose number
    methods are missing, raise, or answer nonsense: a fuzzer found ``TypeError`` for one without
    ``abs()``."""
    rational = draw(st.booleans())
    namespace: dict[str, Any] = {"__repr__": lambda self: "<claimed number>"}
    for name in NUMBER_METHODS:
        behaviour = draw(BEHAVIOURS, label=name)
        if behaviour is not None:
            namespace[name] = behaviour
    if rational:
        for name in RATIONAL_PARTS:
            behaviour = draw(BEHAVIOURS, label=name)
            if behaviour is not None:
                namespace[name] = property(behaviour)
    cls = type("Claimed", (), namespace)
    (Rational if rational else Real).register(cls)
    return cls()


@given(claimed_numbers())
def test_a_claimed_number_is_a_quantity_or_an_invalid_request(value: object) -> None:
    try:
        units = to_units(value, what="GPU quantity")
    except InvalidRequest as exc:
        assert "GPU quantity <claimed number>" in str(exc)
        return
    assert isinstance(units, int) and 0 <= units <= MAX_QUANTITY * UNIT


def test_a_claimed_fraction_is_shown_as_itself_not_as_the_parts_it_claims() -> None:
    """A class registered as Rational whose parts say 1/1 while its abs() is huge: the message
    named "1/1 is above the largest quantity" (found by the property test above)."""

    class Claimed:
        numerator = 1
        denominator = 1

        def __abs__(self) -> int:
            return 10**400

        def __repr__(self) -> str:
            return "<claimed number>"

    Rational.register(Claimed)
    with pytest.raises(InvalidRequest, match=r"^GPU quantity <claimed number> "):
        to_units(Claimed(), what="GPU quantity")
    assert shown_quantity(Fraction(1, 3)) == "1/3"


def test_a_real_without_abs_or_float_is_an_invalid_request() -> None:
    class Bare:
        def __repr__(self) -> str:
            return "<bare>"

    Real.register(Bare)
    with pytest.raises(InvalidRequest, match=r"GPU quantity <bare> .*cannot be read as a number"):
        to_units(Bare(), what="GPU quantity")
