"""``accelkit.detect.first_json``: the first spelling of a JSON flag that answers."""

from __future__ import annotations

from accelkit import FakeHost
from accelkit.detect import first_json
from accelkit.diagnostics import collecting

NEW, OLD = ("tool", "--format", "json"), ("tool", "--json")


def test_the_first_command_with_valid_json_answers() -> None:
    host = FakeHost(commands={NEW: (0, '{"a": 1}'), OLD: (0, "[]")})
    assert first_json(host, NEW, OLD) == {"a": 1}
    assert host.runs == [NEW]


def test_a_rejected_flag_or_bad_json_moves_on_with_a_note() -> None:
    host = FakeHost(commands={NEW: (2, "", "unknown flag"), OLD: (0, "[1]")})
    with collecting("x") as notes:
        assert first_json(host, NEW, OLD) == [1]
    assert "unknown flag" in notes[0].message
    with collecting("x") as notes:
        assert first_json(FakeHost(commands={"tool": (0, "nope")}), NEW, OLD) is None
    assert len(notes) == 2 and all("not valid JSON" in n.message for n in notes)


def test_a_missing_tool_gives_none() -> None:
    assert first_json(FakeHost(), NEW, OLD) is None
