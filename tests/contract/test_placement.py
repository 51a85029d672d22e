"""Placement rules over bitmasks: table cases and properties."""

from __future__ import annotations

import pytest
from accelkit import ALIGNED_BLOCKS, CONTIGUOUS, LOWEST_FREE, Device
from hypothesis import given
from hypothesis import strategies as st


def mask(*keys: int) -> int:
    return sum(1 << k for k in keys)


def keys_of(value: int | None) -> list[int]:
    assert value is not None
    return [k for k in range(value.bit_length()) if value >> k & 1]


def test_lowest_free_takes_the_lowest_keys() -> None:
    assert keys_of(LOWEST_FREE.choose(mask(1, 3, 4, 7), 2)) == [1, 3]
    assert LOWEST_FREE.choose(mask(1), 2) is None
    assert LOWEST_FREE.choose(mask(1), 0) == 0


@pytest.mark.parametrize(
    ("free", "count", "expected"),
    [
        (mask(0, 1, 2, 3), 2, [0, 1]),
        (mask(1, 2, 3), 2, [2, 3]),  # {1,2} is not aligned
        (mask(1, 2), 2, None),
        (mask(0, 1, 2, 3, 4, 5, 6, 7), 4, [0, 1, 2, 3]),
        (mask(1, 2, 3, 4, 5, 6, 7), 4, [4, 5, 6, 7]),
        (mask(2, 3, 4, 5), 4, None),
        (mask(5), 1, [5]),
    ],
)
def test_aligned_blocks(free: int, count: int, expected: list[int] | None) -> None:
    chosen = ALIGNED_BLOCKS.choose(free, count)
    assert (None if chosen is None else keys_of(chosen)) == expected


def test_contiguous_takes_the_lowest_run() -> None:
    assert keys_of(CONTIGUOUS.choose(mask(0, 2, 3, 4, 6), 3)) == [2, 3, 4]
    assert CONTIGUOUS.choose(mask(0, 2, 4), 2) is None


def test_keys_use_numeric_ids_only_for_id_keyed_rules() -> None:
    devices = [Device(id="4"), Device(id="5"), Device(id="6")]
    assert ALIGNED_BLOCKS.keys(devices) == [4, 5, 6]
    assert LOWEST_FREE.keys(devices) == [0, 1, 2]
    assert CONTIGUOUS.keys([Device(id="GPU-a"), Device(id="GPU-b")]) == [0, 1]


@given(st.integers(min_value=0, max_value=(1 << 32) - 1), st.sampled_from([1, 2, 4, 8]))
def test_every_rule_chooses_only_free_keys_of_the_right_count(free: int, count: int) -> None:
    for rule in (LOWEST_FREE, ALIGNED_BLOCKS, CONTIGUOUS):
        chosen = rule.choose(free, count)
        if chosen is None:
            continue
        assert chosen & free == chosen
        assert bin(chosen).count("1") == count
        ks = keys_of(chosen)
        if rule is not LOWEST_FREE:
            assert ks == list(range(ks[0], ks[0] + count))
        if rule is ALIGNED_BLOCKS:
            assert ks[0] % count == 0


@given(st.integers(min_value=0, max_value=(1 << 16) - 1), st.integers(min_value=1, max_value=16))
def test_lowest_free_finds_a_choice_whenever_enough_are_free(free: int, count: int) -> None:
    chosen = LOWEST_FREE.choose(free, count)
    assert (chosen is not None) == (bin(free).count("1") >= count)


def naive(free: int, count: int, step: int) -> int | None:
    """The lowest run of ``count`` free keys starting at a multiple of ``step``, by scanning."""
    for start in range(0, max(free.bit_length(), 1), step):
        block = mask(*range(start, start + count))
        if free & block == block:
            return block
    return None


@given(st.integers(min_value=0, max_value=(1 << 140) - 1), st.sampled_from([1, 2, 3, 4, 8, 16]))
def test_blocks_and_runs_are_the_lowest_that_exist(free: int, count: int) -> None:
    # Complete (a block is found whenever one exists) and lowest, on nodes past 128 devices.
    assert CONTIGUOUS.choose(free, count) == naive(free, count, 1)
    assert ALIGNED_BLOCKS.choose(free, count) == naive(free, count, count)


@pytest.mark.parametrize("rule", [LOWEST_FREE, ALIGNED_BLOCKS, CONTIGUOUS])
def test_nothing_free_and_zero_count(rule: object) -> None:
    assert rule.choose(0, 1) is None  # type: ignore[attr-defined]
    assert rule.choose(0, 0) == 0  # type: ignore[attr-defined]
    assert rule.choose(mask(0, 1), -1) is None  # type: ignore[attr-defined]


def test_sparse_high_blocks() -> None:
    free = mask(126, 127, *range(0, 100, 2))
    assert keys_of(CONTIGUOUS.choose(free, 2)) == [126, 127]
    assert keys_of(ALIGNED_BLOCKS.choose(free, 2)) == [126, 127]
    assert ALIGNED_BLOCKS.choose(mask(125, 126), 2) is None
