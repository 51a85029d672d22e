"""Property tests for the parsers every plugin reads vendor output with.

Two properties each: arbitrary input never raises (the parser answers None or a value of the
right shape), and valid input, written the way the vendor tool writes it, reads back exactly.
"""

from __future__ import annotations

import json
from typing import Any

from accelkit.detect import (
    find_field,
    json_records,
    parse_colon_records,
    parse_csv,
    parse_int,
    parse_json,
    parse_memory,
)
from accelkit.diagnostics import collecting
from accelkit.host import FakeHost
from accelkit_plugins.ascend import AscendManager
from accelkit_plugins.ascend import testing as fake_ascend
from accelkit_plugins.ascend.tables import parse_aligned_table
from hypothesis import given
from hypothesis import strategies as st

LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"  # what str.splitlines splits on


def _clean(text: str) -> bool:
    return text == text.strip() and not any(ch in LINE_BREAKS for ch in text)


# Cells as tools print them: no separator, no line break, no surrounding blanks.
CSV_CELL = st.text(st.characters(blacklist_characters="," + LINE_BREAKS), min_size=1).filter(
    lambda t: _clean(t) and bool(t)
)
WORDS = st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_./()", min_size=1)
TABLE_CELL = st.lists(WORDS, min_size=1, max_size=3).map(" ".join).filter(lambda t: len(t) <= 29)
KEY = st.lists(WORDS, min_size=1, max_size=3).map(" ".join)
VALUE = st.text(st.characters(blacklist_characters=LINE_BREAKS), max_size=30).map(str.strip)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
UNITS.update({"KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12})


# -- CSV (nvidia-smi, hl-smi) ------------------------------------------------------------------
@given(st.text(max_size=300), st.integers(1, 8))
def test_csv_never_raises(text: str, fields: int) -> None:
    with collecting("test"):
        rows = parse_csv(text, fields, "output")
    assert rows is None or all(len(row) == fields for row in rows)
    assert rows != [] or not text.strip()  # nothing usable in a non-blank text is None


@given(
    st.integers(1, 6).flatmap(
        lambda n: st.lists(st.lists(CSV_CELL, min_size=n, max_size=n), min_size=1, max_size=8)
    )
)
def test_csv_reads_back_what_a_tool_writes(rows: list[list[str]]) -> None:
    text = "".join(", ".join(row) + "\n" for row in rows)
    assert parse_csv(text, len(rows[0]), "output") == rows


# -- JSON (amd-smi, xpu-smi, neuron-ls) --------------------------------------------------------
@given(st.text(max_size=300))
def test_json_never_raises(text: str) -> None:
    with collecting("test"):
        data = parse_json(text, "output")
    records = json_records(data)
    assert records is None or all(isinstance(r, dict) for r in records)
    find_field(data, "bdf", "gpu")


@given(JSON)
def test_json_reads_back_and_records_never_raise(data: Any) -> None:
    assert parse_json(json.dumps(data), "output") == data
    records = json_records(data)
    assert records is None or all(isinstance(r, dict) for r in records)
    for record in records or ():
        find_field(record, "device_id", "vram", "size")
        parse_int(record.get("device_id"))


@given(st.lists(st.dictionaries(st.text(max_size=8), JSON, max_size=4), max_size=6))
def test_device_records_are_found_at_the_top_or_under_a_key(records: list[dict[str, Any]]) -> None:
    assert json_records(records) == records
    assert json_records({"device_list": records}) == records
    others = [{"pid": 1}]  # a newer release's other top-level list comes first: devices win
    assert json_records({"processes": others, "neuron_devices": records}) == records


# -- "key : value" records (npu-smi info -l) ---------------------------------------------------
@given(st.text(max_size=400))
def test_colon_records_never_raise(text: str) -> None:
    with collecting("test"):
        records = parse_colon_records(text, "NPU ID", "list")
    assert records is None or (records and all("NPU ID" in r for r in records))


@given(
    st.lists(
        st.dictionaries(KEY.filter(lambda k: k != "NPU ID"), VALUE, max_size=4),
        min_size=1,
        max_size=6,
    ),
    st.integers(0, 99),
)
def test_colon_records_read_back_as_npu_smi_writes_them(
    bodies: list[dict[str, str]], first: int
) -> None:
    records = [{"NPU ID": str(first + n), **body} for n, body in enumerate(bodies)]
    lines = ["\tTotal Count                    : 1", ""]
    for record in records:
        lines += [f"\t{key.ljust(31)}: {value}" for key, value in record.items()] + [""]
    assert parse_colon_records("\n".join(lines), "NPU ID", "list") == records


# -- space-aligned tables (npu-smi info -m) ----------------------------------------------------
@given(st.text(max_size=400))
def test_aligned_table_never_raises(text: str) -> None:
    with collecting("test"):
        rows = parse_aligned_table(text, "table")
    assert rows is None or (rows and all(isinstance(row, dict) for row in rows))


@given(
    st.integers(1, 5).flatmap(
        lambda n: st.tuples(
            st.lists(TABLE_CELL, min_size=n, max_size=n, unique=True),
            st.lists(st.lists(TABLE_CELL, min_size=n, max_size=n), min_size=1, max_size=8),
        )
    )
)
def test_aligned_table_reads_back_as_npu_smi_pads_it(
    table: tuple[list[str], list[list[str]]],
) -> None:
    header, rows = table
    text = "".join(
        "\t" + "".join(cell.ljust(31) for cell in cells[:-1]) + cells[-1] + "\n"
        for cells in (header, *rows)
    )
    assert parse_aligned_table(text, "table") == [dict(zip(header, row)) for row in rows]


@given(
    st.lists(
        st.builds(
            fake_ascend.FakeNpu,
            st.integers(0, 15),
            st.integers(1, 4),
            st.sampled_from(["Ascend 910B3", "Ascend 310P3", "Ascend 910B4"]),
            st.booleans(),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_npu_smi_chip_maps_give_every_chip_by_logic_id(npus: list[fake_ascend.FakeNpu]) -> None:
    host = FakeHost(commands={fake_ascend.CHIP_MAP_ARGV: (0, fake_ascend.chip_map_output(npus))})
    devices = AscendManager().detect(host)
    chips = [npu.chip_name.replace(" ", "") for npu in npus for _ in range(npu.chips)]
    assert [(d.id, d.type_label, d.source) for d in devices] == [
        (str(n), chip, "command") for n, chip in enumerate(chips)
    ]


# -- memory sizes (hl-smi, amd-smi, nvidia-smi) ------------------------------------------------
@given(st.text(max_size=60))
def test_memory_never_raises_and_is_never_negative(text: str) -> None:
    size = parse_memory(text)
    assert size is None or size >= 0


@given(st.integers(0, 10**7), st.sampled_from(sorted(UNITS)), st.sampled_from(["", " ", "  "]))
def test_memory_reads_back_in_every_unit(number: int, unit: str, gap: str) -> None:
    assert parse_memory(f"{number}{gap}{unit}") == number * UNITS[unit]
    assert parse_memory(f" {number} ", default_unit=unit) == number * UNITS[unit]
