"""A vendor tool's output is read up to a bound, cut early: 10 MB of garbage costs what the bound
costs. Sizes, never timings: the parsers may touch a huge text only through ``len`` and a slice
of at most the bound, and keep at most ``MAX_DEVICES`` records (a fuzzer found 10 MB parsed
whole before the device cap)."""

from __future__ import annotations

import json
from typing import Any, Callable, Optional

import pytest
from accelkit.detect import (
    MAX_DEVICES,
    json_records,
    parse_colon_records,
    parse_csv,
    parse_json,
    run_command,
)
from accelkit.detect._bounds import MAX_LINES, MAX_OUTPUT
from accelkit.diagnostics import Diagnostic, collecting
from accelkit.host import FakeHost
from hypothesis import given, settings
from hypothesis import strategies as st

HUGE = 10 * 2**20


class Watched(str):
    """A text that fails a test when read beyond the bound: ``len`` and slices of at most
    :data:`MAX_OUTPUT` characters are all a parser may take from it (every ``str`` method a
    parser could run over the whole text is refused, below)."""

    def __getitem__(self, key: Any) -> str:
        assert isinstance(key, slice), f"indexed the whole text with {key!r}"
        start, stop, _ = key.indices(len(self))
        assert stop - start <= MAX_OUTPUT, f"sliced {stop - start} characters"
        return str(str.__getitem__(self, key))


def refused(name: str) -> Callable[..., Any]:
    def method(self: str, *args: object, **kwargs: object) -> Any:
        raise AssertionError(f"{name}() read the whole {len(self)}-character text")

    return method


for _name in ("splitlines", "split", "strip", "partition", "find", "encode", "__iter__"):
    setattr(Watched, _name, refused(_name))


def garbage(line: str) -> Watched:
    return Watched((line * (HUGE // len(line) + 1))[:HUGE])


def parsed(parse: Callable[[], Any]) -> tuple[Any, list[Diagnostic]]:
    with collecting("test") as notes:
        result = parse()
    return result, notes


@pytest.mark.parametrize("line", ["0, GPU-1, Acme, 1\n", "x\n", "a,b\r\n", "\u2028"])
def test_csv_reads_a_bounded_part_of_huge_output(line: str) -> None:
    rows, notes = parsed(lambda: parse_csv(garbage(line), 4, "acme-smi output"))
    assert rows is None or len(rows) <= MAX_DEVICES
    assert any("acme-smi output is 10485760 characters" in n.message for n in notes), notes


def test_csv_keeps_at_most_max_devices_rows() -> None:
    rows, notes = parsed(lambda: parse_csv("0, a, b, 1\n" * (MAX_DEVICES + 5), 4, "out"))
    assert rows is not None and len(rows) == MAX_DEVICES
    assert any(f"more than {MAX_DEVICES} rows" in n.message for n in notes)


def test_csv_stops_after_max_lines() -> None:
    text = "\n" * (MAX_LINES + 10) + "0, a, b, 1\n"
    rows, notes = parsed(lambda: parse_csv(text, 4, "out"))
    assert rows == []  # the one row came after the bound
    assert any(f"more than {MAX_LINES} lines" in n.message for n in notes)


def test_colon_records_read_a_bounded_part_of_huge_output() -> None:
    records, notes = parsed(lambda: parse_colon_records(garbage("NPU ID : 1\n"), "NPU ID", "out"))
    assert records is not None and len(records) == MAX_DEVICES
    assert any("out is 10485760 characters" in n.message for n in notes)


def test_json_longer_than_the_bound_is_refused_unparsed(monkeypatch: pytest.MonkeyPatch) -> None:
    sizes: list[int] = []
    loads = json.loads

    def watched_loads(text: str, *args: Any, **kwargs: Any) -> Any:
        sizes.append(len(text))
        return loads(text, *args, **kwargs)

    monkeypatch.setattr(json, "loads", watched_loads)
    data, notes = parsed(lambda: parse_json(garbage("[{}, "), "amd-smi output"))
    assert data is None and sizes == []
    assert any("more than the 1048576 accelkit reads" in n.message for n in notes)
    assert parse_json('{"ok": 1}', "small") == {"ok": 1} and sizes == [9]


def test_json_records_keep_at_most_max_devices() -> None:
    records, notes = parsed(lambda: json_records({"devices": [{}] * (10 * MAX_DEVICES)}))
    assert records is not None and len(records) == MAX_DEVICES
    assert any(f"more than {MAX_DEVICES} devices" in n.message for n in notes)


def test_a_command_printing_10_mb_gives_a_bounded_output() -> None:
    host = FakeHost(commands={"acme-smi": (0, garbage("x" * 99 + "\n"))})
    output, notes = parsed(lambda: run_command(host, ["acme-smi"]))
    assert output is not None and len(output) == MAX_OUTPUT
    assert any("`acme-smi` output is 10485760 characters" in n.message for n in notes)


LINES = st.text(max_size=40).map(lambda t: t + "\n")


@settings(max_examples=40, deadline=None)
@given(LINES, st.integers(min_value=1, max_value=8), st.integers(0, 3 * MAX_OUTPUT))
def test_no_output_of_any_size_gives_more_than_max_devices(
    line: str, fields: int, size: int
) -> None:
    text = (line * (size // len(line) + 1))[:size]
    rows, _ = parsed(lambda: parse_csv(text, fields, "out"))
    records, _ = parsed(lambda: parse_colon_records(text, line.partition(":")[0].strip(), "out"))
    for result in (rows, records):
        assert result is None or len(result) <= MAX_DEVICES
    output: Optional[str] = parsed(lambda: run_command(FakeHost(commands={"t": (0, text)}), ["t"]))[
        0
    ]
    assert output is not None and len(output) <= MAX_OUTPUT
