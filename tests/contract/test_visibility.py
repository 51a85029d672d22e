"""Reading and writing id lists: tolerant on read, strict on write."""

from __future__ import annotations

import importlib

import pytest
from accelkit.detect import join_ids, split_ids
from accelkit.manager import AcceleratorManager
from accelkit.policy import CONTIGUOUS
from accelkit.registry import BUILTIN_PLUGINS, variables_read
from accelkit_plugins.neuron.ranges import MAX_RANGE_IDS, format_ranges, parse_ranges
from hypothesis import given, settings
from hypothesis import strategies as st
from runtime_facts import EMPTY_IS_UNSET


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


ID_TOKENS = st.lists(st.text("0123456789abcdefGPU-", min_size=1), max_size=4)


@given(ID_TOKENS, ID_TOKENS, st.sampled_from(["NoDevFiles", " NoDevFiles ", "NoDevFiles\t"]))
def test_the_nothing_visible_marker_among_ids_ends_the_list(
    before: list[str], after: list[str], marker: str
) -> None:
    """Fuzzing found ``NoDevFiles,0`` giving a device named ``NoDevFiles``: among ids, the
    marker is a token no runtime reads, and the list ends there."""
    ids = split_ids(",".join([*before, marker, *after]))
    assert ids == before
    assert "NoDevFiles" not in (ids or [])


def test_ranges_are_bounded() -> None:
    assert len(parse_ranges(f"0-{MAX_RANGE_IDS - 1}") or []) == MAX_RANGE_IDS
    with pytest.raises(ValueError, match="spans more than"):
        parse_ranges("0-999999999999")
    with pytest.raises(ValueError, match="spans more than"):
        parse_ranges(f"0-{MAX_RANGE_IDS - 1},{MAX_RANGE_IDS}")


# -- every built-in data sheet, as pure functions -----------------------------------------------
BUILTIN_FAMILIES = tuple(module.rpartition(".")[2] for module in BUILTIN_PLUGINS)[:7]


def builtin(family: str) -> AcceleratorManager:
    module = importlib.import_module(f"accelkit_plugins.{family}")
    found = [m for m in module.accelkit_register_managers() if m.name == family]
    assert len(found) == 1, f"accelkit_plugins.{family} must provide the {family} family"
    return found[0]


MANAGERS = {family: builtin(family) for family in BUILTIN_FAMILIES}
SAMPLES = (
    *("", " ", "NoDevFiles", " NoDevFiles\n", "all", "none", "0", " 0 , 1 ", "3-1", "0-3"),
    *("1,,2", "GPU-1a2b", "MIG-9/1/0", "level_zero:0,1", "level_zero:*", "opencl:0;level_zero:1"),
    *("*", "0.1", "!level_zero:1", "1,1,1", "2,2,1", "v6e-8", "FLAT", "COMPOSITE", "-1", "99"),
)
"""Values the families' own syntaxes give meaning to (and near misses); text covers the rest."""
VALUES = st.none() | st.sampled_from(SAMPLES) | st.text(max_size=16)


def test_the_builtin_families_are_the_seven() -> None:
    assert BUILTIN_FAMILIES == ("nvidia", "amd", "intel", "neuron", "tpu", "gaudi", "ascend")


@pytest.mark.parametrize("family", BUILTIN_FAMILIES)
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_read_visible_never_raises_on_any_values(family: str, data: st.DataObject) -> None:
    """Any strings in any of the variables a family reads: ids or None, never a crash.

    The one allowance is ``ValueError`` for a value the runtime itself refuses (Neuron's
    ``3-1``), which node detection and ``visible_ids`` report as nothing visible.
    """
    manager = MANAGERS[family]
    names = variables_read(manager)
    drawn = {name: data.draw(VALUES, label=name) for name in names}
    env = {name: value for name, value in drawn.items() if value is not None}
    try:
        ids = manager.read_visible(env)
    except ValueError as exc:
        assert str(exc), "a ValueError must say what is wrong"
        return
    assert ids is None or all(
        isinstance(token, str) and token and token == token.strip() and "," not in token
        for token in ids
    ), ids


@pytest.mark.parametrize("family", BUILTIN_FAMILIES)
@pytest.mark.parametrize("value", ["", "  ", "NoDevFiles", " NoDevFiles\n"])
def test_sentinels_read_as_nothing_visible(family: str, value: str) -> None:
    manager = MANAGERS[family]
    var = manager.visible_devices_env_var
    assert var is not None and var in variables_read(manager)
    assert manager.read_visible({}) is None
    expected = None if value == "" and family in EMPTY_IS_UNSET else []
    assert manager.read_visible({var: value}) == expected


@st.composite
def written_ids(draw: st.DrawFn, manager: AcceleratorManager) -> list[str]:
    """Ids the family would be granted: distinct indices (contiguous for Neuron cores, aligned
    blocks of an allowed size for TPU chips and Gaudi modules)."""
    if manager.scheduling.allowed_quantities:
        size = draw(st.sampled_from(manager.scheduling.allowed_quantities))
        start = size * draw(st.integers(0, 3))
        return [str(n) for n in range(start, start + size)]
    if manager.scheduling.placement is CONTIGUOUS:
        start = draw(st.integers(0, 63))
        return [str(n) for n in range(start, start + draw(st.integers(1, 16)))]
    numbers = draw(st.lists(st.integers(0, 63), unique=True, max_size=8))
    return [str(n) for n in numbers]


@pytest.mark.parametrize("family", BUILTIN_FAMILIES)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_visibility_env_round_trips_over_any_inherited_env(
    family: str, data: st.DataObject
) -> None:
    """What a grant writes reads back as exactly its ids, whatever the worker inherited.

    Inherited values of every variable the family reads (stacked layers such as HIP over ROCr
    or ZE_AFFINITY_MASK under the SYCL selector, and container layers such as
    NVIDIA_VISIBLE_DEVICES) are unset or overwritten, or are never read as runtime ids. The
    values written hold no whitespace.
    """
    manager = MANAGERS[family]
    ids = data.draw(written_ids(manager), label="ids")
    inherited = {
        name: data.draw(st.sampled_from(["0", "7,6", "1,0", "GPU-1", "all", ""]), label=name)
        for name in variables_read(manager)
    }
    written = manager.visibility_env(ids)
    assert all(v is None or not any(ch.isspace() for ch in v) for v in written.values()), written
    env = {**inherited, **written}
    read = manager.read_visible({k: v for k, v in env.items() if v is not None})
    if read is None:  # a whole TPU host is granted by unsetting every variable
        assert written.get(manager.visible_devices_env_var or "", "") is None, written
    else:
        assert read == ids


@pytest.mark.parametrize(
    ("family", "container", "runtime"),
    [
        ("nvidia", "NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"),
        ("gaudi", "HABANA_VISIBLE_DEVICES", "HABANA_VISIBLE_MODULES"),
        ("ascend", "ASCEND_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES"),
    ],
)
def test_container_layers_are_declared_but_never_read_as_runtime_ids(
    family: str, container: str, runtime: str
) -> None:
    manager = MANAGERS[family]
    assert manager.visible_devices_env_var == runtime
    assert container in variables_read(manager), "snapshots must record the container layer"
    assert manager.read_visible({container: "0,1"}) is None
    assert manager.read_visible({container: "none"}) is None
    spaced = "1" if family == "ascend" else " 1 "  # CANN stops at a space
    assert manager.read_visible({container: "4,5", runtime: spaced}) == ["1"]
    assert container not in manager.visibility_env(["1"])
