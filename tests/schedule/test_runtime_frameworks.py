"""accelkit.runtime.devices for JAX and TensorFlow: each family's devices under the names those
frameworks use (JAX's platform and position, TensorFlow's logical device name)."""

from __future__ import annotations

import pytest
from accelkit import Allocator, Device, Frameworks, Registry
from accelkit.runtime import FRAMEWORKS, devices
from core_fakes import Provides, static_manager
from sched_nodes import devices as node_devices
from sched_nodes import make_node

ENVS = {
    "nvidia": {"CUDA_VISIBLE_DEVICES": "4,5"},
    "amd": {"ROCR_VISIBLE_DEVICES": "2,3"},
    "intel": {"ONEAPI_DEVICE_SELECTOR": "level_zero:2,3"},
    "tpu": {"TPU_VISIBLE_CHIPS": "2,3"},
    "neuron": {"NEURON_RT_VISIBLE_CORES": "2-3"},
    "gaudi": {"HABANA_VISIBLE_MODULES": "2,3"},
    "ascend": {"ASCEND_RT_VISIBLE_DEVICES": "2,3"},
}
"""Two devices of each built-in family, as a grant writes them (host ids, not positions)."""


@pytest.mark.parametrize(
    ("family", "torch", "jax", "tensorflow"),
    [
        ("nvidia", ["cuda:0", "cuda:1"], ["gpu:0", "gpu:1"], ["/device:GPU:0", "/device:GPU:1"]),
        ("amd", ["cuda:0", "cuda:1"], ["gpu:0", "gpu:1"], ["/device:GPU:0", "/device:GPU:1"]),
        ("intel", ["xpu:0", "xpu:1"], ["xpu:0", "xpu:1"], ["/device:XPU:0", "/device:XPU:1"]),
        ("tpu", ["xla:0", "xla:1"], ["tpu:0", "tpu:1"], ["/device:TPU:0", "/device:TPU:1"]),
        (
            "neuron",
            ["xla:0", "xla:1"],
            ["neuron:0", "neuron:1"],
            ["/device:NEURON:0", "/device:NEURON:1"],
        ),
        ("gaudi", ["hpu"], ["hpu:0"], ["/device:HPU:0"]),
        ("ascend", ["npu:0", "npu:1"], ["npu:0", "npu:1"], ["/device:NPU:0", "/device:NPU:1"]),
    ],
)
def test_each_family_in_each_framework(
    family: str, torch: list[str], jax: list[str], tensorflow: list[str]
) -> None:
    env = ENVS[family]
    assert devices("torch", env=env) == torch
    assert devices("jax", env=env) == jax
    assert devices("tensorflow", env=env) == tensorflow


def test_a_grant_names_its_own_positions_in_every_framework() -> None:
    node = make_node(node_devices("nvidia", 4))
    alloc = Allocator(node)
    alloc.acquire({"GPU": 1})
    grant = alloc.acquire({"GPU": 2})
    assert grant is not None and grant.ids == {"GPU": ["1", "2"]}
    env = {k: v for k, v in grant.env({}).items() if v is not None}
    assert devices("jax", env=env, grant=grant) == ["gpu:0", "gpu:1"]
    assert devices("tensorflow", env=env, grant=grant) == ["/device:GPU:0", "/device:GPU:1"]
    with pytest.raises(ValueError, match=r"start the worker with grant\.env"):
        devices("jax", env={"CUDA_VISIBLE_DEVICES": "3"}, grant=grant)


def test_no_accelerator_is_the_cpu_in_every_framework() -> None:
    assert [devices(name, env={}) for name in FRAMEWORKS] == [["cpu"]] * len(FRAMEWORKS)


def test_an_unknown_framework_is_a_value_error_listing_the_known_ones() -> None:
    with pytest.raises(ValueError, match="'mxnet'; known: torch, jax, tensorflow"):
        devices("mxnet", env={})


def third_party(frameworks: Frameworks) -> Registry:
    manager = static_manager(
        "acme", "ACME", [Device("0")], visible_devices_env_var="ACME_VISIBLE", frameworks=frameworks
    )
    return Registry([Provides([manager])], autoload=False)


def test_a_third_party_family_is_named_from_its_declarations() -> None:
    registry = third_party(Frameworks(device="mlu"))
    env = {"ACME_VISIBLE": "7"}
    assert devices("jax", env=env, registry=registry) == ["mlu:0"]
    assert devices("tensorflow", env=env, registry=registry) == ["/device:MLU:0"]
    declared = third_party(Frameworks(device="xla", platform="acme"))
    assert devices("jax", env=env, registry=declared) == ["acme:0"]


def test_pytorch_xla_without_a_platform_says_what_to_declare() -> None:
    registry = third_party(Frameworks(device="xla"))
    env = {"ACME_VISIBLE": "7"}
    assert devices("torch", env=env, registry=registry) == ["xla:0"]
    with pytest.raises(ValueError, match=r"acme declares .*'xla'.*Frameworks\(platform=\.\.\.\)"):
        devices("jax", env=env, registry=registry)
