"""visible_ids: what a worker sees, by family, from its environment."""

from __future__ import annotations

import pytest
from accelkit import Allocator, registry, visible_ids
from runtime_facts import EMPTY_IS_UNSET
from sched_nodes import devices, make_node


def test_every_family_is_answered_and_unset_means_unrestricted() -> None:
    seen = visible_ids({})
    assert list(seen) == [m.name for m in registry.managers()]
    assert set(seen.values()) == {None}


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"CUDA_VISIBLE_DEVICES": "0,1"}, ["0", "1"]),
        ({"CUDA_VISIBLE_DEVICES": " 2 , 3 "}, ["2", "3"]),
        ({"CUDA_VISIBLE_DEVICES": "GPU-abc"}, ["GPU-abc"]),
        ({"CUDA_VISIBLE_DEVICES": ""}, []),
        ({"CUDA_VISIBLE_DEVICES": "NoDevFiles"}, []),
    ],
)
def test_ids_are_strings_read_tolerantly(env: dict[str, str], expected: list[str]) -> None:
    assert visible_ids(env)["nvidia"] == expected


def test_defaults_to_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASCEND_RT_VISIBLE_DEVICES", "3")
    assert visible_ids()["ascend"] == ["3"]


def test_a_worker_sees_what_its_grant_wrote() -> None:
    node = make_node(devices("nvidia", 4), devices("tpu", 4), devices("ascend", 2))
    grant = Allocator(node).acquire({"GPU": 2, "TPU": 2, "NPU": 0.5})
    assert grant is not None
    env = {k: v for k, v in grant.env({}, hide_others=True).items() if v is not None}
    seen = visible_ids(env)
    assert seen["nvidia"] == ["0", "1"]
    assert seen["tpu"] == ["0", "1"]
    assert seen["ascend"] == ["0"]


@pytest.mark.parametrize("value", ["", "NoDevFiles", "  ", " NoDevFiles "])
def test_nothing_visible_in_every_family(value: str) -> None:
    for manager in registry.managers():
        variable = manager.visible_devices_env_var
        assert variable is not None
        expected = None if value == "" and manager.name in EMPTY_IS_UNSET else []
        assert visible_ids({variable: value})[manager.name] == expected, manager.name


def test_every_family_reads_back_what_a_grant_wrote_with_spaces_around_ids() -> None:
    for manager in registry.managers():
        variable = manager.visible_devices_env_var
        assert variable is not None
        written = manager.visibility_env(["0"])[variable]
        assert written is not None
        expected = [] if manager.name == "ascend" else ["0"]  # CANN stops at a space
        assert visible_ids({variable: f" {written} "})[manager.name] == expected, manager.name


def test_an_unreadable_value_is_nothing_visible_and_spares_the_others() -> None:
    env = {"NEURON_RT_VISIBLE_CORES": "x-y", "CUDA_VISIBLE_DEVICES": "1"}
    with pytest.warns(registry.PluginWarning, match="neuron: cannot read"):
        seen = visible_ids(env)
    assert seen["neuron"] == []
    assert seen["nvidia"] == ["1"]
