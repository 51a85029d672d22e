"""The Ray bridge's decisions, without a Ray cluster: which options Ray gets, which part of what
Ray reserved for a worker the node's ledger grants (and with which type pin), and which
variables show a family the ids Ray assigned when Ray's own variable misses it."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from accelkit import Device, FakeHost, Node, detect_node, load_snapshot, registry

pytest.importorskip("ray")

ROOT = Path(__file__).resolve().parents[2]


def test_gpu_is_num_gpus_and_every_other_resource_stays_in_resources() -> None:
    from accelkit.integrations.ray import ray_remote_options

    assert ray_remote_options({"GPU": 0.5, "MLU": 1, "accelerator_type:H100": 0.001}) == {
        "num_gpus": 0.5,
        "resources": {"MLU": 1, "accelerator_type:H100": 0.001},
    }
    assert ray_remote_options({}) == {}


def mlu_node() -> Node:
    """Eight Cambricon MLUs (type MLU370-X8), Ray's GPU family beside them (two logical GPUs)."""
    return detect_node(
        load_snapshot(ROOT / "contrib/cambricon/nodes/cambricon-mlu370-x8-8"), {"GPU": 2}
    )


def test_only_resources_of_the_nodes_families_that_ray_assigns_no_ids_for_go_to_the_ledger() -> (
    None
):
    from accelkit.integrations.ray import ledger_request

    reserved = {"CPU": 1, "GPU": 1, "MLU": 2, "my_license": 1, "node:127.0.0.1": 0.001}
    assert ledger_request(reserved, mlu_node()) == ({"MLU": 2}, None)
    assert ledger_request({"CPU": 1, "my_license": 1}, mlu_node()) == ({}, None)
    # Ray picks the ids of its own families, whether the node has them or not.
    assert ledger_request({"neuron_cores": 2, "TPU": 4}, mlu_node()) == ({}, None)


def test_a_type_pin_applies_only_to_the_family_that_has_that_type() -> None:
    from accelkit.integrations.ray import ledger_request

    gpu_type = {"GPU": 1, "MLU": 1, "accelerator_type:H100": 0.001}
    assert ledger_request(gpu_type, mlu_node()) == ({"MLU": 1}, None)
    mlu_type = {"GPU": 1, "MLU": 1, "accelerator_type:MLU370-X8": 0.001}
    assert ledger_request(mlu_type, mlu_node()) == ({"MLU": 1}, "MLU370-X8")
    both = {**gpu_type, **mlu_type}
    assert ledger_request(both, mlu_node()) == ({"MLU": 1}, "MLU370-X8")


def test_two_type_pins_of_the_ledgers_families_are_refused() -> None:
    from accelkit.integrations.ray import ledger_request

    node = Node(
        devices=[
            Device("0", family="cambricon", resource_name="MLU", type_label="X"),
            Device("0", family="acme", resource_name="ACME", type_label="Y"),
        ],
        resources={"MLU": 1, "ACME": 1, "accelerator_type:X": 1, "accelerator_type:Y": 1},
    )
    pins = {"accelerator_type:X": 0.001, "accelerator_type:Y": 0.001}
    with pytest.raises(ValueError, match="one accelerator type per ledger request"):
        ledger_request({"MLU": 1, "ACME": 1, **pins}, node)


def musa_node() -> Node:
    return detect_node(load_snapshot(ROOT / "contrib/mthreads/nodes/mthreads-s4000-8"))


def test_a_gpu_family_that_rays_variable_misses_gets_rays_ids_in_its_own() -> None:
    from accelkit.integrations.ray import ray_ids_env

    cuda = {"GPU": "CUDA_VISIBLE_DEVICES"}
    assert ray_ids_env(musa_node(), {"GPU": ["3", "5"]}, {"GPU": 2}, cuda) == {
        "MUSA_VISIBLE_DEVICES": "3,5"
    }
    assert ray_ids_env(musa_node(), {"GPU": ["3"]}, {"GPU": 0.5}, cuda) == {
        "MUSA_VISIBLE_DEVICES": "3"
    }
    # Intel reads ZE_AFFINITY_MASK, which Ray writes where it finds Intel GPUs; not CUDA's.
    intel = detect_node(load_snapshot(ROOT / "examples/nodes/intel-max1550-4gpu"))
    assert ray_ids_env(intel, {"GPU": ["1"]}, {"GPU": 1}, {"GPU": "ZE_AFFINITY_MASK"}) == {}
    written = ray_ids_env(intel, {"GPU": ["1"]}, {"GPU": 1}, cuda)
    assert written["ONEAPI_DEVICE_SELECTOR"] == "level_zero:1"


def test_families_that_read_rays_variable_are_left_to_ray() -> None:
    from accelkit.integrations.ray import ray_ids_env

    nvidia = detect_node(load_snapshot(ROOT / "examples/nodes/nvidia-h100-8gpu"))
    amd = detect_node(load_snapshot(ROOT / "examples/nodes/amd-mi300x-8gpu"))
    ids, reserved = {"GPU": ["1"]}, {"GPU": 1}
    assert ray_ids_env(nvidia, ids, reserved, {"GPU": "CUDA_VISIBLE_DEVICES"}) == {}
    assert ray_ids_env(amd, ids, reserved, {"GPU": "HIP_VISIBLE_DEVICES"}) == {}
    assert ray_ids_env(musa_node(), {}, {}, {}) == {}


def test_a_ray_id_beyond_the_familys_devices_is_an_error_not_a_wrong_card() -> None:
    from accelkit.integrations.ray import ray_ids_env

    with pytest.raises(ValueError, match="Ray assigned GPU id '8'"):
        ray_ids_env(musa_node(), {"GPU": ["8"]}, {"GPU": 1}, {"GPU": "CUDA_VISIBLE_DEVICES"})


def test_a_gpu_resource_shared_by_two_families_is_left_as_ray_set_it() -> None:
    from accelkit.integrations.ray import ray_ids_env

    node = Node(
        devices=[
            Device("0", family="nvidia", resource_name="GPU"),
            Device("0", family="mthreads", resource_name="GPU"),
        ],
        resources={"GPU": 2},
    )
    with pytest.warns(RuntimeWarning, match="nvidia, mthreads share GPU"):
        env = ray_ids_env(node, {"GPU": ["1"]}, {"GPU": 1}, {"GPU": "CUDA_VISIBLE_DEVICES"})
    assert env == {}


def test_async_functions_are_refused_as_ray_refuses_them() -> None:
    from accelkit.integrations.ray import remote

    async def infer() -> None:
        pass

    async def stream() -> AsyncIterator[int]:
        yield 1

    for function in (infer, stream):
        with pytest.raises(ValueError, match="async def"):
            remote(function, resources={"ACME": 1})


def test_only_tasks_that_reserve_devices_give_up_ray_worker_reuse() -> None:
    # a fresh worker process per call costs about half a second: CPU tasks keep Ray's reuse
    from accelkit.integrations.ray import remote

    def work() -> int:
        return 1

    def options(wrapped: object) -> dict[str, object]:
        return dict(wrapped._default_options)  # type: ignore[attr-defined]

    assert "max_calls" not in options(remote(work))
    assert "max_calls" not in options(remote(work, num_cpus=2))
    assert options(remote(work, resources={"GPU": 1}))["max_calls"] == 1
    assert options(remote(work, resources={"ACME": 1}))["max_calls"] == 1
    assert options(remote(work, resources={"ACME": 1}, max_calls=3))["max_calls"] == 3


def test_a_class_without_options_becomes_an_actor_class() -> None:
    # ray.remote() with no arguments is refused: a class with no options is wrapped bare
    from accelkit.integrations.ray import remote

    class Counter:
        pass

    assert type(remote(Counter)).__name__ == "ActorClass(Counter)"


def test_a_reserved_family_its_worker_did_not_detect_stops_the_call() -> None:
    # Ray counted an ACME card for the call; without a device here the call would see every one
    from accelkit.integrations.ray import _check_detected

    with pytest.raises(RuntimeError, match=r"Ray reserved ACME \(acme\) for this call"):
        _check_detected({"CPU": 1, "ACME": 1}, Node())
    _check_detected({"CPU": 1, "my_license": 1}, Node())  # Ray's alone: nothing to find


@pytest.fixture
def cambricon_fails_to_import(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process's plugins loaded afresh with ``import accelkit_cambricon`` failing, as in a
    Ray worker whose environment lacks a dependency of the plugin."""
    pytest.importorskip("accelkit_cambricon")
    monkeypatch.setitem(sys.modules, "accelkit_cambricon", None)
    previous = registry.set_default(None)
    try:
        yield
    finally:
        registry.set_default(previous)


@pytest.mark.usefixtures("cambricon_fails_to_import")
@pytest.mark.filterwarnings("ignore::accelkit.PluginWarning")  # the plugin's failure, said
def test_a_custom_resource_while_a_plugin_failed_to_load_stops_the_call() -> None:
    # `accelkit plugins` said cambricon: error, yet the call passed and the ledger granted
    # nothing: the task ran with no MLU_VISIBLE_DEVICES set, seeing every card.
    from accelkit.integrations.ray import _check_detected

    assert any(i.name == "cambricon" and i.status == "error" for i in registry.plugin_report())
    node = detect_node(FakeHost())
    with pytest.raises(
        RuntimeError, match=r"Ray reserved MLU for this call.*plugin 'cambricon'.*import failed"
    ):
        _check_detected({"CPU": 1, "MLU": 1}, node)
    # Ray's own resources, ids and pins are no plugin's: nothing to stop
    _check_detected({"CPU": 1, "GPU": 1, "accelerator_type:H100": 0.001}, node)


def test_a_worker_gets_back_the_environment_it_had(monkeypatch: pytest.MonkeyPatch) -> None:
    # a worker Ray reuses must not show its next call the devices of a grant given back
    import os

    from accelkit.integrations.ray import _restore

    monkeypatch.setenv("KEPT", "1")
    monkeypatch.setenv("CHANGED", "before")
    before = dict(os.environ)
    monkeypatch.setenv("ACME_VISIBLE_DEVICES", "3")
    monkeypatch.setenv("CHANGED", "during")
    monkeypatch.delenv("KEPT")
    _restore(before)
    assert dict(os.environ) == before
