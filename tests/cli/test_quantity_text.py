"""Quantities as written on the command line (``-r``, ``--override``, ``--per-worker``): one
ASCII grammar, whole numbers exact, and a reason for everything else."""

from __future__ import annotations

from fractions import Fraction

import pytest
from accelkit.cli._common import quantity
from hypothesis import given
from hypothesis import strategies as st


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0.5", 0.5),
        (".5", 0.5),
        ("2", 2),
        (" 3 ", 3),
        ("+2", 2),
        ("-1", -1),  # read, and refused as negative by the request's check
        ("1e-4", 0.0001),
        ("1/3", Fraction(1, 3)),
        ("9007199254740993", 9007199254740993),  # exact: a float would make it ...992
        ("0e5", 0.0),  # zero, whatever its exponent's digits
        ("0.0e-3", 0.0),
    ],
)
def test_numbers_read_as_written(text: str, value: object) -> None:
    read = quantity(text)
    assert read == value and type(read) is type(value)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("٣", "is not a number"),  # float() reads Arabic-Indic digits
        ("1_0", "is not a number"),  # float() reads 10
        ("inf", "is not a number"),
        ("nan", "is not a number"),
        ("0x10", "is not a number"),
        ("1e999", "is above the largest quantity, 9007199254740992"),
        ("1" * 5000, "is 5000 characters, too long for a quantity"),
        ("1/0", "divides by zero"),
        # a positive amount below one unit is refused, not read as "nothing" (all devices)
        ("1e-30", "is below the smallest quantity, 0.0001"),
        ("1e-400", "is below the smallest quantity"),  # a float rounds it to 0.0
        ("0.00005", "is below the smallest quantity"),
        # a negative amount is said to be negative, however large or small
        ("-1e999", "is negative"),
        ("-0.00005", "is negative"),
    ],
)
def test_anything_else_is_refused_with_why(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        quantity(text)


@given(st.integers(min_value=0, max_value=10**30))
def test_whole_numbers_are_exact(number: int) -> None:
    assert quantity(str(number)) == number


NUMERIC = st.from_regex(r"\A[+-]?[0-9]{0,4}(\.[0-9]{0,4})?([eE][+-]?[0-9]{1,3})?(/[0-9]{1,3})?\Z")


@given(st.one_of(st.text(max_size=12), NUMERIC))
def test_what_is_read_is_what_python_reads_in_ascii(text: str) -> None:
    try:
        read = quantity(text)
    except ValueError:
        return
    assert text.strip().isascii() and "_" not in text
    exact = isinstance(read, (int, Fraction))
    assert read == (Fraction(text.strip()) if exact else float(text))


def test_the_per_worker_option_says_why_a_quantity_is_refused() -> None:
    # argparse alone says "invalid value" and echoes the whole argument
    import argparse

    from accelkit.cli._common import quantity_argument

    with pytest.raises(argparse.ArgumentTypeError, match="5000 characters, too long") as caught:
        quantity_argument("1" * 5000)
    assert len(str(caught.value)) < 200
