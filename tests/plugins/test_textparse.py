"""``accelkit.textparse``: lenient parsers for vendor tools' text."""

from __future__ import annotations

import pytest
from accelkit.detect import parse_colon_records, parse_memory
from accelkit.diagnostics import collecting
from accelkit_plugins.ascend.tables import parse_aligned_table
from hypothesis import given
from hypothesis import strategies as st

CHIP_MAP = (
    "\tNPU ID                         Chip ID                        Chip Logic ID"
    "                  Chip Name                     \n"
    "\t0                              0                              0"
    "                              Ascend 910B3\n"
    "\t0                              1                              -"
    "                              Mcu                           \n"
)


def test_aligned_table_keeps_single_spaces_inside_cells() -> None:
    assert parse_aligned_table(CHIP_MAP, "map") == [
        {"NPU ID": "0", "Chip ID": "0", "Chip Logic ID": "0", "Chip Name": "Ascend 910B3"},
        {"NPU ID": "0", "Chip ID": "1", "Chip Logic ID": "-", "Chip Name": "Mcu"},
    ]


def test_aligned_table_skips_ragged_rows_with_a_note() -> None:
    text = "A  B\n1  2\n3\n4  5  6\n"
    with collecting("test") as notes:
        rows = parse_aligned_table(text, "table")
    assert rows == [{"A": "1", "B": "2"}]
    assert len(notes) == 2 and all(n.level == "warning" for n in notes)


@pytest.mark.parametrize("text", [None, "", "   \n\n", "A  B\n", "A  B\nonly-one\n"])
def test_aligned_table_without_rows_is_none(text: str | None) -> None:
    assert parse_aligned_table(text, "table") is None


def test_colon_records_start_at_the_first_key() -> None:
    text = (
        "\tTotal Count                    : 2\n\n"
        "\tNPU ID                         : 0\n"
        "\tChip Count                     : 1\n\n"
        "\tNPU ID                         : 3\n"
        "\tProduct Name                   : Atlas 300I Duo: x\n"
        "\tChip Count                     : 2\n"
    )
    assert parse_colon_records(text, "NPU ID", "list") == [
        {"NPU ID": "0", "Chip Count": "1"},
        {"NPU ID": "3", "Product Name": "Atlas 300I Duo: x", "Chip Count": "2"},
    ]


@pytest.mark.parametrize("text", [None, "", "Total Count : 0\n", "no colons here"])
def test_colon_records_without_records_is_none(text: str | None) -> None:
    assert parse_colon_records(text, "NPU ID", "list") is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("98304 MiB", 98304 * 2**20),
        ("98304MiB", 98304 * 2**20),
        (" 96 GiB ", 96 * 2**30),
        ("65536 MB", 65536 * 10**6),
        ("1.5 KiB", 1536),
        ("512", 512 * 2**20),
        ("0 B", 0),
        ("N/A", None),
        ("", None),
        (None, None),
        ("-1 MiB", None),
        ("12 parsecs", None),
    ],
)
def test_memory_sizes(text: str | None, expected: int | None) -> None:
    assert parse_memory(text) == expected


def test_memory_default_unit() -> None:
    assert parse_memory("2", default_unit="GiB") == 2 * 2**30


@given(st.text(max_size=400))
def test_parsers_never_raise(text: str) -> None:
    for rows in (parse_aligned_table(text, "t"), parse_colon_records(text, "K", "t")):
        assert rows is None or (rows and all(isinstance(row, dict) for row in rows))
    size = parse_memory(text)
    assert size is None or size >= 0
