"""Reading and writing id lists: tolerant on read, strict on write."""

from __future__ import annotations

import pytest
from accelkit.visibility import format_ranges, join_ids, parse_ranges, split_ids
from hypothesis import given
from hypothesis import strategies as st


@pytest.mark.parametrize(
    ("value", "ids"),
    [
        (None, None),
        ("", []),
        ("  ", []),
        ("NoDevFiles", []),
        (" NoDevFiles\n", []),
        ("0,1", ["0", "1"]),
        (" 0 , 1 ,", ["0", "1"]),
        ("GPU-abc,MIG-def", ["GPU-abc", "MIG-def"]),
        ("3,1,2", ["3", "1", "2"]),  # order is kept: the runtime numbers devices in that order
    ],
)
def test_split_ids(value: str | None, ids: list[str] | None) -> None:
    assert split_ids(value) == ids


def test_join_never_writes_whitespace_and_rejects_unwritable_ids() -> None:
    assert join_ids(["0", "1", "10"]) == "0,1,10"
    with pytest.raises(ValueError, match="cannot be written"):
        join_ids(["0", "1 2"])
    with pytest.raises(ValueError, match="cannot be written"):
        join_ids(["a,b"])


@pytest.mark.parametrize(
    ("value", "ids"),
    [
        ("0-3", ["0", "1", "2", "3"]),
        ("5", ["5"]),
        ("0-1, 4 ,6-7", ["0", "1", "4", "6", "7"]),
        ("", []),
        (None, None),
    ],
)
def test_parse_ranges(value: str | None, ids: list[str] | None) -> None:
    assert parse_ranges(value) == ids


@pytest.mark.parametrize("value", ["a", "1-", "3-1", "-2", "1-b"])
def test_parse_ranges_rejects_malformed_tokens(value: str) -> None:
    with pytest.raises(ValueError, match=repr(value)):
        parse_ranges(value)


def test_format_ranges_sorts_numerically() -> None:
    assert format_ranges(["10", "2", "3", "4", "7"]) == "2-4,7,10"
    assert format_ranges(["5"]) == "5"
    assert format_ranges([]) == ""


@given(st.sets(st.integers(min_value=0, max_value=200)))
def test_ranges_round_trip(numbers: set[int]) -> None:
    ids = [str(n) for n in sorted(numbers)]
    assert parse_ranges(format_ranges(ids)) == ids


@given(st.text())
def test_split_ids_never_raises_and_never_yields_blank_tokens(value: str) -> None:
    ids = split_ids(value)
    assert ids is not None
    assert all(token and token == token.strip() and "," not in token for token in ids)
