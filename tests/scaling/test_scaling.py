"""Training plans: the seed's "Configuring Scale and Accelerators" examples, any family, TPU
slices, backends, framework devices and shared visibility for co-located workers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple, Optional

import accelkit
import pytest
from accelkit.runtime import devices
from accelkit.scaling import PodSlice, ScalingConfig, tpu_slice
from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def builtins_and_example(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ACCELKIT_DISABLE_PLUGINS", "ACCELKIT_DISABLE_PLUGIN_AUTOLOAD"):
        monkeypatch.delenv(name, raising=False)
    accelkit.registry.reset()


# -- Ray Train's "Configuring Scale and Accelerators", example by example ------------------------
def h100_grants(plan: ScalingConfig) -> list[accelkit.Grant]:
    """Every bundle of ``plan`` granted on the recorded 8-GPU node, CPUs as the plan needs."""
    from accelkit.host import load_snapshot

    host = load_snapshot(ROOT / "examples" / "nodes" / "nvidia-h100-8gpu")
    node = accelkit.detect_node(host, overrides={"CPU": plan.total_resources["CPU"]})
    allocator = accelkit.Allocator(node)
    grants = [allocator.acquire(bundle) for bundle in plan.bundles]
    held = [grant for grant in grants if grant is not None]
    assert len(held) == len(grants), f"the H100 node cannot hold {plan.bundles}"
    return held


def worker_devices(grant: accelkit.Grant) -> list[str]:
    """The torch devices a worker started with ``grant``'s environment names."""
    return devices(env={k: v for k, v in grant.env({}).items() if v is not None}, grant=grant)


def heads(plan: ScalingConfig) -> dict[int, str]:
    """Bundle index -> the slice head resource it holds."""
    return {i: k for i, bundle in enumerate(plan.bundles) for k in bundle if k.endswith("-head")}


def test_eight_workers() -> None:
    """``ScalingConfig(num_workers=8)``: eight CPU workers of 1 CPU each, gloo between them."""
    plan = ScalingConfig(num_workers=8)
    assert plan.per_worker_resources == {"CPU": 1.0}
    assert plan.bundles == [{"CPU": 1.0}] * 8
    assert plan.total_resources == {"CPU": 8.0}
    assert (plan.slices, heads(plan), plan.backend) == (0, {}, "gloo")


def test_eight_workers_with_one_gpu_each() -> None:
    """``ScalingConfig(num_workers=8, use_gpu=True)``: "training runs on 8 GPUs (8 workers,
    each using one GPU)"."""
    plan = ScalingConfig(num_workers=8, use_gpu=True)
    assert plan.per_worker_resources == {"CPU": 1.0, "GPU": 1.0}
    assert plan.total_resources == {"CPU": 8.0, "GPU": 8.0}
    assert plan.bundles == [{"CPU": 1.0, "GPU": 1.0}] * 8
    assert (plan.slices, heads(plan), plan.placement_strategy) == (0, {}, "PACK")
    assert plan.backend == "nccl"
    assert [worker_devices(g) for g in h100_grants(plan)] == [["cuda:0"]] * 8


def test_one_gpu_worker_gets_cuda_0() -> None:
    """``ScalingConfig(num_workers=1, use_gpu=True)``, whose worker asserts
    ``get_device() == torch.device("cuda:0")``."""
    plan = ScalingConfig(num_workers=1, use_gpu=True)
    assert plan.bundles == [{"CPU": 1.0, "GPU": 1.0}]
    assert [worker_devices(g) for g in h100_grants(plan)] == [["cuda:0"]]


def test_two_gpus_for_one_worker() -> None:
    """``ScalingConfig(num_workers=1, use_gpu=True, resources_per_worker={"GPU": 2})``, whose
    worker asserts ``get_devices() == [torch.device("cuda:0"), torch.device("cuda:1")]``."""
    plan = ScalingConfig(num_workers=1, use_gpu=True, resources_per_worker={"GPU": 2})
    assert plan.per_worker_resources == {"GPU": 2.0, "CPU": 1.0}
    assert plan.bundles == [{"GPU": 2.0, "CPU": 1.0}]
    assert plan.total_resources == {"GPU": 2.0, "CPU": 1.0}
    assert [worker_devices(g) for g in h100_grants(plan)] == [["cuda:0", "cuda:1"]]


def test_four_cpus_and_two_gpus_per_worker() -> None:
    """``ScalingConfig(num_workers=8, resources_per_worker={"CPU": 4, "GPU": 2},
    use_gpu=True)``."""
    plan = ScalingConfig(num_workers=8, resources_per_worker={"CPU": 4, "GPU": 2}, use_gpu=True)
    assert plan.per_worker_resources == {"CPU": 4.0, "GPU": 2.0}
    assert plan.bundles == [{"CPU": 4.0, "GPU": 2.0}] * 8
    assert plan.total_resources == {"CPU": 32.0, "GPU": 16.0}
    assert (plan.slices, heads(plan)) == (0, {})


def test_half_a_gpu_and_four_cpus_per_worker_share_devices() -> None:
    """``ScalingConfig(num_workers=8, resources_per_worker={"CPU": 4, "GPU": 0.5},
    use_gpu=True)``: "multiple workers are assigned the same CUDA device"."""
    plan = ScalingConfig(num_workers=8, resources_per_worker={"CPU": 4, "GPU": 0.5}, use_gpu=True)
    assert plan.per_worker_resources == {"CPU": 4.0, "GPU": 0.5}
    assert plan.bundles == [{"CPU": 4.0, "GPU": 0.5}] * 8
    assert plan.total_resources == {"CPU": 32.0, "GPU": 4.0}
    assert [g.ids["GPU"] for g in h100_grants(plan)] == [[str(i // 2)] for i in range(8)]


def test_a_tenth_of_a_gpu_adds_up_exactly() -> None:
    plan = ScalingConfig(num_workers=10, use_gpu=True, resources_per_worker={"GPU": 0.1})
    assert plan.total_resources["GPU"] == 1.0


def test_an_a100_worker() -> None:
    """``ScalingConfig(num_workers=1, use_gpu=True, accelerator_type="A100")``: "assign each
    worker a NVIDIA A100 GPU", with Ray's token demand for the type."""
    plan = ScalingConfig(num_workers=1, use_gpu=True, accelerator_type="A100")
    assert plan.accelerator_type_demand == {"accelerator_type:A100": 0.001}
    assert plan.per_worker_resources == {"CPU": 1.0, "GPU": 1.0, "accelerator_type:A100": 0.001}
    assert plan.bundles == [{"CPU": 1.0, "GPU": 1.0, "accelerator_type:A100": 0.001}]
    assert (plan.slices, heads(plan)) == (0, {})
    assert ScalingConfig(2, use_gpu=True, accelerator_type="A100").total_resources == {
        "CPU": 2.0,
        "GPU": 2.0,
        "accelerator_type:A100": 0.002,
    }


TYPE_A100 = "accelerator_type:A100"
TYPE_V6E = "accelerator_type:TPU-V6E"


def test_an_accelerator_type_alone_pins_cpu_workers_to_its_nodes() -> None:
    """``ScalingConfig(2, accelerator_type="A100")``: Ray's CPU workers with the type's token
    demand, which lands them on A100 nodes without taking a GPU."""
    plan = ScalingConfig(2, accelerator_type="A100")
    assert plan.per_worker_resources == {"CPU": 1.0, TYPE_A100: 0.001}
    assert plan.accelerator_type_demand == {TYPE_A100: 0.001}
    assert plan.total_resources == {"CPU": 2.0, TYPE_A100: 0.002}
    assert plan.backend == "gloo"


def test_an_amount_of_the_type_resource_is_kept() -> None:
    """Ray only fills in the type's token (``setdefault``): an amount the user gives stands."""
    plan = ScalingConfig(
        2, use_gpu=True, accelerator_type="A100", resources_per_worker={TYPE_A100: 1}
    )
    assert plan.per_worker_resources == {"CPU": 1.0, "GPU": 1.0, TYPE_A100: 1.0}
    assert plan.accelerator_type_demand == {TYPE_A100: 1.0}


def test_a_zero_amount_asks_for_none_of_it() -> None:
    """Ray drops resources_per_worker's zeros: 0 CPU is a worker without CPUs (never refilled
    with the 1-CPU default), 0 of another resource leaves it out, and 0 GPU on a plan without
    GPUs is no GPU. No bundle holds a zero, which Ray's placement groups refuse."""
    gpu = ScalingConfig(2, use_gpu=True, resources_per_worker={"CPU": 0, "memory": 0})
    assert gpu.per_worker_resources == {"GPU": 1.0}
    assert gpu.bundles == [{"GPU": 1.0}] * 2
    assert gpu.total_resources == {"GPU": 2.0}
    cpu = ScalingConfig(2, resources_per_worker={"CPU": 0, "custom": 1, "GPU": 0})
    assert cpu.bundles == [{"custom": 1.0}] * 2
    typed = ScalingConfig(1, accelerator_type="A100", resources_per_worker={"CPU": 0})
    assert typed.bundles == [{TYPE_A100: 0.001}]
    tpu = ScalingConfig(
        4, use_tpu=True, topology="4x4", accelerator_type="v6e", resources_per_worker={"CPU": 0}
    )
    assert tpu.per_worker_resources == {"TPU": 4.0, "accelerator_type:TPU-V6E": 0.001}
    nothing = r"CPU 0 and memory 0, so it asks for nothing, .*: give it CPU \(leave CPU out for 1\)"
    with pytest.raises(ValueError, match=nothing):
        ScalingConfig(2, resources_per_worker={"CPU": 0, "memory": 0})


def test_one_v6e_4x4_slice_one_worker_per_host() -> None:
    """``ScalingConfig(num_workers=4, use_tpu=True, topology="4x4",
    accelerator_type="TPU-V6E")``: "Single slice: 4 v6e VMs in a 4x4 topology"."""
    plan = ScalingConfig(num_workers=4, use_tpu=True, topology="4x4", accelerator_type="TPU-V6E")
    assert plan.tpu is not None and (plan.tpu.pod_type, plan.tpu.hosts) == ("v6e-16", 4)
    worker = {"CPU": 1.0, "TPU": 4.0, TYPE_V6E: 0.001}
    assert plan.per_worker_resources == worker
    assert plan.bundles == [{**worker, "TPU-v6e-16-head": 1.0}] + [worker] * 3
    assert plan.total_resources == {
        "CPU": 4.0,
        "TPU": 16.0,
        TYPE_V6E: 0.004,
        "TPU-v6e-16-head": 1.0,
    }
    assert plan.slices == 1 and heads(plan) == {0: "TPU-v6e-16-head"}
    assert [plan.slice_of(w) for w in range(4)] == [0, 0, 0, 0]
    assert plan.placement_strategy == "STRICT_SPREAD"
    assert plan.backend == "xla"


def test_eight_v6e_4x4_workers_are_two_slices_with_a_head_each() -> None:
    """``ScalingConfig(num_workers=8, use_tpu=True, topology="4x4",
    accelerator_type="TPU-V6E")``: "Multi-slice: 2 v6e slices, 8 VMs total"."""
    plan = ScalingConfig(num_workers=8, use_tpu=True, topology="4x4", accelerator_type="TPU-V6E")
    worker = {"CPU": 1.0, "TPU": 4.0, TYPE_V6E: 0.001}
    assert plan.per_worker_resources == worker
    assert plan.bundles == ([{**worker, "TPU-v6e-16-head": 1.0}] + [worker] * 3) * 2
    assert plan.total_resources == {
        "CPU": 8.0,
        "TPU": 32.0,
        TYPE_V6E: 0.008,
        "TPU-v6e-16-head": 2.0,
    }
    assert plan.slices == 2 and heads(plan) == {0: "TPU-v6e-16-head", 4: "TPU-v6e-16-head"}
    assert [plan.slice_of(w) for w in range(8)] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert plan.placement_strategy == "STRICT_SPREAD"


def test_two_of_each_hosts_four_chips_still_one_worker_per_host() -> None:
    """``ScalingConfig(num_workers=4, use_tpu=True, topology="4x4", accelerator_type="TPU-V6E",
    resources_per_worker={"TPU": 2})``: "to use only 2 of the 4 chips on a ct6e-standard-4t
    host". Four workers, one per host, 2 chips each, one slice."""
    plan = ScalingConfig(
        num_workers=4,
        use_tpu=True,
        topology="4x4",
        accelerator_type="TPU-V6E",
        resources_per_worker={"TPU": 2},
    )
    assert plan.tpu is not None and plan.tpu.chips_per_host == 4
    worker = {"TPU": 2.0, "CPU": 1.0, TYPE_V6E: 0.001}
    assert plan.per_worker_resources == worker
    assert plan.bundles == [{**worker, "TPU-v6e-16-head": 1.0}] + [worker] * 3
    assert plan.total_resources == {
        "TPU": 8.0,
        "CPU": 4.0,
        TYPE_V6E: 0.004,
        "TPU-v6e-16-head": 1.0,
    }
    assert plan.slices == 1 and heads(plan) == {0: "TPU-v6e-16-head"}
    assert [plan.slice_of(w) for w in range(4)] == [0, 0, 0, 0]
    assert plan.placement_strategy == "STRICT_SPREAD"  # never two workers on one host
    eight = ScalingConfig(
        8, use_tpu=True, topology="4x4", accelerator_type="TPU-V6E", resources_per_worker={"TPU": 2}
    )
    assert eight.slices == 2 and eight.total_resources["TPU"] == 16.0


@pytest.mark.parametrize("spelled", ["v6e", "TPU-V6E", "v6e-16", "trillium"])
def test_a_tpu_plan_asks_for_the_type_its_hosts_advertise(spelled: str) -> None:
    """Ray v2 puts ``accelerator_type:<type>`` in every TPU worker's bundle; here the key is the
    label the slice's hosts advertise (the recorded v6e host's), however the type is spelled."""
    plan = ScalingConfig(4, use_tpu=True, topology="4x4", accelerator_type=spelled)
    assert plan.tpu is not None and plan.tpu.type_label == "TPU-V6E"
    assert plan.accelerator_type_demand == {TYPE_V6E: 0.001}
    assert all(bundle[TYPE_V6E] == 0.001 for bundle in plan.bundles)
    from accelkit.host import load_snapshot

    node = accelkit.detect_node(load_snapshot(ROOT / "examples" / "nodes" / "tpu-v6e-8"))
    assert TYPE_V6E in node.resources
    v5e = ScalingConfig(4, use_tpu=True, topology="4x4", accelerator_type="v5e")
    assert v5e.accelerator_type_demand == {"accelerator_type:TPU-V5LITEPOD": 0.001}


def test_a_v4_2x2x4_slice() -> None:
    """``ScalingConfig(num_workers=4, use_tpu=True, topology="2x2x4",
    accelerator_type="TPU-V4")``: "For TPUs, accelerator_type specifies the TPU generation"."""
    plan = ScalingConfig(num_workers=4, use_tpu=True, topology="2x2x4", accelerator_type="TPU-V4")
    assert plan.tpu is not None
    assert (plan.tpu.chips, plan.tpu.hosts, plan.tpu.pod_type) == (16, 4, "v4-32")
    worker = {"CPU": 1.0, "TPU": 4.0, "accelerator_type:TPU-V4": 0.001}
    assert plan.per_worker_resources == worker
    assert plan.bundles == [{**worker, "TPU-v4-32-head": 1.0}] + [worker] * 3
    assert plan.total_resources == {
        "CPU": 4.0,
        "TPU": 16.0,
        "accelerator_type:TPU-V4": 0.004,
        "TPU-v4-32-head": 1.0,
    }
    assert plan.slices == 1 and heads(plan) == {0: "TPU-v4-32-head"}
    assert [plan.slice_of(w) for w in range(4)] == [0, 0, 0, 0]


def test_nccl_with_gpus_gloo_otherwise_and_overridable() -> None:
    """Ray Train: "By default Ray Train uses NCCL when ``use_gpu=True`` and Gloo otherwise",
    overridden with ``ScalingConfig(num_workers=num_training_workers, use_gpu=True)`` and
    ``TorchConfig(backend="gloo")``: here ``backend="gloo"``."""
    assert ScalingConfig(num_workers=1, use_gpu=True).backend == "nccl"
    assert ScalingConfig(num_workers=1).backend == "gloo"
    overridden = ScalingConfig(num_workers=1, use_gpu=True, backend="gloo")
    assert overridden.backend == "gloo"
    assert overridden.bundles == [{"CPU": 1.0, "GPU": 1.0}]


def test_two_cpus_per_worker_need_no_trainer_cpu() -> None:
    """``ScalingConfig(num_workers=4, resources_per_worker={"CPU": 2}, trainer_resources={"CPU":
    0})``, Ray Train's deprecated way to fit 4 workers of 2 CPUs into 8 CPUs. accelkit reserves
    no trainer, so the plan without ``trainer_resources`` already asks for exactly 8."""
    plan = ScalingConfig(num_workers=4, resources_per_worker={"CPU": 2})
    assert plan.bundles == [{"CPU": 2.0}] * 4
    assert plan.total_resources == {"CPU": 8.0}


def test_the_readme_shows_the_override_as_it_plans() -> None:
    text = (ROOT / "README.md").read_text()
    blocks = [b.split("\n", 1)[1] for b in text.split("```")[1::2] if b.startswith("python")]
    training = next(b for b in blocks if 'resources_per_worker={"TPU": 2}' in b)
    namespace: dict[str, object] = {}
    exec(compile(training, "README.md", "exec"), namespace)
    tpu = namespace["tpu"]
    assert isinstance(tpu, ScalingConfig)
    assert tpu.bundles[:2] == [
        {"TPU": 2.0, "CPU": 1.0, TYPE_V6E: 0.001, "TPU-v6e-16-head": 1.0},
        {"TPU": 2.0, "CPU": 1.0, TYPE_V6E: 0.001},
    ]
    assert (tpu.slices, tpu.placement_strategy, tpu.slice_of(3)) == (1, "STRICT_SPREAD", 0)


def test_single_host_slices_each_take_their_head() -> None:
    plan = ScalingConfig(2, use_tpu=True, topology="2x4", accelerator_type="v6e")
    assert plan.tpu is not None and plan.tpu.hosts == 1
    assert plan.slices == 2 and heads(plan) == {0: "TPU-v6e-8-head", 1: "TPU-v6e-8-head"}
    assert [plan.slice_of(w) for w in range(2)] == [0, 1]


@given(
    st.sampled_from(
        [("v6e", "4x4"), ("v6e", "8x8"), ("v6e", "2x4"), ("v4", "2x2x2"), ("v5p", "4x4x4")]
    ),
    st.integers(min_value=1, max_value=4),
    st.sampled_from([None, 1, 2, 4]),
)
def test_k_slices_reserve_k_heads_at_each_slices_first_worker(
    shape: tuple[str, str], k: int, chips: Optional[int]
) -> None:
    found = tpu_slice(*shape)
    wanted = None if chips is None else {"TPU": chips}
    plan = ScalingConfig(
        k * found.hosts,
        use_tpu=True,
        accelerator_type=shape[0],
        topology=shape[1],
        resources_per_worker=wanted,
    )
    assert plan.slices == k
    assert heads(plan) == {s * found.hosts: found.head_resource for s in range(k)}
    assert plan.total_resources[found.head_resource] == k
    assert [plan.slice_of(w) for w in range(plan.num_workers)] == sorted(
        list(range(k)) * found.hosts
    )
    per_worker = found.chips_per_host if chips is None else chips
    assert plan.total_resources["TPU"] == k * found.hosts * per_worker


# -- any family through accelerator= ---------------------------------------------------------------
def test_neuron_cores_are_whole_and_use_xla() -> None:
    plan = ScalingConfig(2, accelerator="neuron", resources_per_worker={"neuron_cores": 8})
    assert plan.per_worker_resources == {"neuron_cores": 8.0, "CPU": 1.0}
    assert plan.backend == "xla"
    with pytest.raises(ValueError, match=r"neuron_cores 0\.5 is refused: .*fractional"):
        ScalingConfig(2, accelerator="neuron_cores", resources_per_worker={"neuron_cores": 0.5})


def test_gaudi_takes_aligned_module_groups_and_hccl() -> None:
    plan = ScalingConfig(4, accelerator="gaudi", resources_per_worker={"HPU": 2})
    assert plan.total_resources == {"HPU": 8.0, "CPU": 4.0}
    assert plan.backend == "hccl"
    with pytest.raises(ValueError, match=r"HPU 3 is refused: .*1, 2, 4, 8"):
        ScalingConfig(1, accelerator="HPU", resources_per_worker={"HPU": 3})


def test_a_third_party_family_is_first_class() -> None:
    plan = ScalingConfig(3, accelerator="acme")
    assert plan.per_worker_resources == {"CPU": 1.0, "ACME": 1.0}
    assert plan.backend == "gloo"  # the example plugin declares no collective backend
    assert ScalingConfig(1, accelerator="acme", backend="mpi").backend == "mpi"


def test_backends_come_from_the_families() -> None:
    backends = {
        family: ScalingConfig(1, accelerator=family).backend
        for family in ("nvidia", "amd", "intel", "ascend", "gaudi", "neuron", "tpu")
    }
    assert backends == {
        "nvidia": "nccl",
        "amd": "nccl",
        "intel": "xccl",
        "ascend": "hccl",
        "gaudi": "hccl",
        "neuron": "xla",
        "tpu": "xla",
    }
    assert ScalingConfig(4).backend == "gloo"
    assert ScalingConfig(4).per_worker_resources == {"CPU": 1.0}


# -- refusals name the value and what would be right ---------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"resources_per_worker": {"GPU": 1}}, r"asks for GPU 1, .*set use_gpu=True"),
        ({"use_gpu": True, "resources_per_worker": {"GPU": 0}}, r"gives each worker GPU 0"),
        ({"use_gpu": True, "use_tpu": True}, r"one accelerator, got GPU and TPU"),
        (
            {"use_gpu": True, "accelerator": "neuron"},
            r"one accelerator, got GPU and neuron_cores: a worker group of GPU and neuron_cores",
        ),
        (
            {"use_gpu": True, "topology": "4x4"},
            r"topology '4x4' shapes a TPU slice; this plan uses GPU",
        ),
        ({"topology": "2x2"}, r"this plan uses no accelerator: set use_tpu=True or drop topology"),
        ({"use_tpu": True}, r"4 TPU workers need the slice .*accelerator_type.*topology"),
        ({"resources_per_worker": {"TPU": 2}}, r"asks for TPU 2, .*set use_tpu=True"),
        (
            {"use_gpu": True, "resources_per_worker": {"GPU": 1.5}},
            r"resources_per_worker\['GPU'\] 1\.5 is above 1",
        ),
        ({"accelerator": "mlu"}, r"accelerator 'mlu' is no family or resource; known: "),
        (
            {"resources_per_worker": {"CPU": 0}},
            r"resources_per_worker gives each worker CPU 0, so it asks for nothing, .*empty bundle",
        ),
        (
            {"use_gpu": True, "accelerator_type": "A100", "resources_per_worker": {TYPE_A100: 0}},
            r"names accelerator_type 'A100', but resources_per_worker gives each worker "
            r"accelerator_type:A100 0; give a positive amount or drop accelerator_type",
        ),
        ({"use_gpu": True, "resources_per_worker": {"CPU": -1}}, r"resources_per_worker\['CPU'\]"),
    ],
)
def test_refusals_say_what_is_wrong(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ScalingConfig(4, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("workers", "kwargs", "message"),
    [
        (
            6,
            {},
            r"6 TPU workers do not fill whole v6e-16 slices: each worker is one host and a 4x4 "
            r"slice has 4 hosts, so num_workers is a multiple of 4, such as 4 \(1 slice\) or 8 "
            r"\(2 slices\); resources_per_worker sets the chips each worker uses on its host",
        ),
        (6, {"resources_per_worker": {"TPU": 2}}, r"multiple of 4, such as 4 \(1 slice\) or 8"),
        (3, {}, r"multiple of 4, such as 4 \(1 slice\);"),
        (
            4,
            {"resources_per_worker": {"TPU": 8}},
            r"asks for TPU 8, but each worker is one v6e-16 host, which has 4 chips: ask for at "
            r"most 4, or leave TPU out",
        ),
        (
            4,
            {"resources_per_worker": {"TPU": 3}},
            r"TPU 3 is refused: .*ask for 1, 2, 4, 8 \(each worker is one v6e-16 host of 4 chips\)",
        ),
        (4, {"resources_per_worker": {"TPU": 0.5}}, r"TPU 0\.5 is refused: .*fractional"),
        (4, {"resources_per_worker": {"TPU": 0}}, r"gives each worker TPU 0; give a positive"),
        (0, {}, r"num_workers must be a whole number of at least 1, not 0"),
    ],
)
def test_tpu_refusals(workers: int, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ScalingConfig(
            workers,
            use_tpu=True,
            accelerator_type="v6e",
            topology="4x4",
            **kwargs,  # type: ignore[arg-type]
        )


def test_slice_of_names_a_rank_of_a_plan_on_slices() -> None:
    plan = ScalingConfig(4, use_tpu=True, accelerator_type="v6e", topology="4x4")
    refusals = {
        4: r"worker 4 is not in this plan of 4 workers \(ranks 0 to 3\)",
        -1: r"worker -1 is not in this plan",
        True: r"a worker is its rank, a whole number, not True",
    }
    for rank, message in refusals.items():
        with pytest.raises(ValueError, match=message):
            plan.slice_of(rank)
    with pytest.raises(ValueError, match=r"this plan runs on no TPU slice.*use_tpu=True"):
        ScalingConfig(4, use_gpu=True).slice_of(0)


# -- TPU slices ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("accelerator_type", "topology", "chips", "per_host", "hosts", "pod_type"),
    [
        ("v4", "2x2x1", 4, 4, 1, "v4-8"),
        ("v4", "2x2x2", 8, 4, 2, "v4-16"),
        ("TPU-V5P", "2x2x4", 16, 4, 4, "v5p-32"),
        ("v5e", "2x4", 8, 8, 1, "v5litepod-8"),
        ("TPU-V5LITEPOD", "4x4", 16, 4, 4, "v5litepod-16"),
        ("v6e", "1x1", 1, 1, 1, "v6e-1"),
        ("v6e", "2x2", 4, 4, 1, "v6e-4"),
        ("v6e", "2x4", 8, 8, 1, "v6e-8"),
        ("v6e-16", "4x4", 16, 4, 4, "v6e-16"),
        ("v6e", "16x16", 256, 4, 64, "v6e-256"),
        ("tpu7x", "2x2x2", 8, 4, 2, "v7x-16"),
        ("v3", "4x4", 16, 4, 4, "v3-32"),
    ],
)
def test_slices(
    accelerator_type: str, topology: str, chips: int, per_host: int, hosts: int, pod_type: str
) -> None:
    found = tpu_slice(accelerator_type, topology)
    assert (found.chips, found.chips_per_host, found.hosts, found.pod_type) == (
        chips,
        per_host,
        hosts,
        pod_type,
    )


@pytest.mark.parametrize(
    ("accelerator_type", "topology", "message"),
    [
        ("v6e", "3x3", r"v6e has no topology '3x3'; its topologies are 1x1, 2x2, 2x4, 4x4"),
        ("v4", "4x4", r"v4 topology '4x4' is not 3 positive whole numbers joined by 'x'"),
        ("v6e", "2x2x2", r"is not 2 positive whole numbers"),
        ("v4", "3x1x1", r"3 chips, which do not fill hosts of 4"),
        ("v6e-32", "4x4", r"'v6e-32' is a 32-core slice, but topology '4x4' makes v6e-16"),
        ("v9z", "4x4", r"unknown TPU generation in 'v9z'"),
        ("v6e-x", "4x4", r"the pod-type size 'x' is not a number"),
    ],
)
def test_slice_refusals(accelerator_type: str, topology: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        tpu_slice(accelerator_type, topology)


@given(
    st.sampled_from(["v4", "v5p", "v7x"]),
    st.tuples(*(st.sampled_from([1, 2, 4, 8, 16]) for _ in range(3))),
)
def test_three_d_slices_fill_whole_hosts(generation: str, dims: tuple[int, int, int]) -> None:
    topology = "x".join(map(str, dims))
    chips = dims[0] * dims[1] * dims[2]
    if chips % 4:  # 3-D generations start at 2x2x1: a host's 4 chips
        with pytest.raises(ValueError, match="do not fill hosts of 4"):
            tpu_slice(generation, topology)
        return
    found = tpu_slice(generation, topology)
    assert found.chips == chips == found.hosts * found.chips_per_host
    assert found.pod_type == f"{generation}-{chips * 2}"


@given(st.sampled_from(["v5e", "v6e"]), st.sampled_from(["1x1", "2x2", "2x4", "4x4", "4x8", "8x8"]))
def test_two_d_slices_count_chips(generation: str, topology: str) -> None:
    found = tpu_slice(generation, topology)
    assert found.hosts * found.chips_per_host == found.chips
    assert found.pod_type.endswith(f"-{found.chips}")


@given(st.text(max_size=12))
def test_any_topology_text_is_a_slice_or_a_value_error(topology: str) -> None:
    try:
        found = tpu_slice("v6e", topology)
    except ValueError:
        return
    assert found.chips >= 1


def test_slices_are_shaped_by_the_tpu_plugin() -> None:
    from accelkit_plugins.tpu.generations import TpuSlice

    found = tpu_slice("v6e", "4x4")
    assert isinstance(found, TpuSlice)
    assert isinstance(found, PodSlice)
    assert not isinstance(("v6e", "4x4"), PodSlice)
    assert accelkit.get_manager("tpu").slice_shape("v6e", "4x4") == found  # type: ignore[attr-defined]


class SlicelessTpuManager(accelkit.AcceleratorManager):
    """A third-party TPU family that offers no slice shapes."""

    name = "tpu"
    resource_name = "TPU"
    visible_devices_env_var = "TPU_VISIBLE_CHIPS"
    api_version = 2

    def detect(self, host: accelkit.Host) -> list[accelkit.Device]:
        return []


class SlicelessTpuPlugin:
    @accelkit.hookimpl
    def accelkit_register_managers(self) -> list[accelkit.AcceleratorManager]:
        return [SlicelessTpuManager()]


def test_a_family_without_slice_shapes_says_so() -> None:
    plugins = accelkit.Registry([SlicelessTpuPlugin()], autoload=False)
    message = r"no slice shapes from family 'tpu': its manager has no slice_shape\(\) method"
    with pytest.raises(ValueError, match=message):
        tpu_slice("v6e", "4x4", registry=plugins)
    with pytest.raises(ValueError, match=message):
        ScalingConfig(4, use_tpu=True, accelerator_type="v6e", topology="4x4", registry=plugins)


class OldSlice(NamedTuple):
    """A slice record written before PodSlice named the type label."""

    chips: int
    chips_per_host: int
    hosts: int
    pod_type: str
    head_resource: str


class OldShapesTpuManager(SlicelessTpuManager):
    """A third-party TPU family whose slice shapes lack ``type_label``."""

    def slice_shape(self, accelerator_type: str, topology: str) -> object:
        if topology == "broken":
            return {"chips": 16}  # no record of a slice at all
        return OldSlice(16, 4, 4, "v6e-16", "TPU-v6e-16-head")


class OldShapesTpuPlugin:
    @accelkit.hookimpl
    def accelkit_register_managers(self) -> list[accelkit.AcceleratorManager]:
        return [OldShapesTpuManager()]


def test_a_slice_shape_without_a_type_label_still_plans_and_asks_for_no_type() -> None:
    """A family's slice records written before ``type_label`` keep working: the plan lands
    its workers on any host of the resource, as before the label was asked for."""
    plugins = accelkit.Registry([OldShapesTpuPlugin()], autoload=False)
    plan = ScalingConfig(4, use_tpu=True, accelerator_type="v6e", topology="4x4", registry=plugins)
    assert plan.per_worker_resources == {"CPU": 1.0, "TPU": 4.0}
    assert plan.accelerator_type_demand is None
    assert plan.bundles[0]["TPU-v6e-16-head"] == 1.0


def test_a_slice_shape_without_a_pod_slices_fields_is_named() -> None:
    plugins = accelkit.Registry([OldShapesTpuPlugin()], autoload=False)
    message = r"family 'tpu' shaped \{'chips': 16\}, which is no PodSlice: .*head_resource"
    with pytest.raises(ValueError, match=message):
        ScalingConfig(4, use_tpu=True, accelerator_type="v6e", topology="broken", registry=plugins)


def test_without_a_tpu_family_no_slice_is_shaped() -> None:
    nothing = accelkit.Registry([], autoload=False)
    with pytest.raises(ValueError, match="no TPU slice can be shaped"):
        tpu_slice("v6e", "4x4", registry=nothing)
    with pytest.raises(ValueError, match="no loaded family provides TPU"):
        ScalingConfig(4, use_tpu=True, accelerator_type="v6e", topology="4x4", registry=nothing)


# -- framework devices and shared visibility ------------------------------------------------------
def test_devices_are_renumbered_from_zero() -> None:
    env = {"CUDA_VISIBLE_DEVICES": "4,5", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert devices("torch", env=env) == ["cuda:0", "cuda:1"]
    assert devices(env={"ONEAPI_DEVICE_SELECTOR": "level_zero:2"}) == ["xpu:0"]
    assert devices(env={"ASCEND_RT_VISIBLE_DEVICES": "3"}) == ["npu:0"]
    assert devices(env={"HABANA_VISIBLE_MODULES": "0,1"}) == ["hpu"]
    assert devices(env={}) == ["cpu"]
    with pytest.raises(ValueError, match="no device names for framework 'mxnet'"):
        devices("mxnet", env={})


def h100_node() -> accelkit.Node:
    from accelkit.host import load_snapshot

    return accelkit.detect_node(load_snapshot(ROOT / "examples" / "nodes" / "nvidia-h100-8gpu"))


def test_a_worker_whose_env_disagrees_with_its_grant_is_told() -> None:
    grant = accelkit.Allocator(h100_node()).acquire({"GPU": 2})
    assert grant is not None
    env = {k: v for k, v in grant.env({}).items() if v is not None}
    assert devices(env=env, grant=grant) == ["cuda:0", "cuda:1"]
    with pytest.raises(
        ValueError, match=r"grant gives nvidia devices \['0', '1'\], but .* \['5'\]"
    ):
        devices(env={"CUDA_VISIBLE_DEVICES": "5"}, grant=grant)
    with pytest.raises(ValueError, match="does not restrict the family"):
        devices(env={}, grant=grant)


def test_co_located_workers_see_each_others_gpus_in_numeric_order() -> None:
    node = accelkit.detect_node(accelkit.FakeHost(), overrides={"GPU": 12})
    allocator = accelkit.Allocator(node)
    held = [allocator.acquire({"GPU": 1}) for _ in range(12)]
    for grant in held:
        assert grant is not None
    for index in (2, 3, 10, 11):
        allocator.release(held[index])  # type: ignore[arg-type]
    first = allocator.acquire({"GPU": 2})
    second = allocator.acquire({"GPU": 2})
    assert first is not None and second is not None
    assert first.ids == {"GPU": ["2", "3"]} and second.ids == {"GPU": ["10", "11"]}
    env = second.env({}, peers=[first])
    assert env["CUDA_VISIBLE_DEVICES"] == "2,3,10,11"
    assert env["ACCELKIT_LOCAL_DEVICES_NVIDIA"] == "2,3"
    shown = {k: v for k, v in env.items() if v is not None}
    assert devices(env=shown) == ["cuda:2", "cuda:3"]
    assert devices(env=shown, grant=second) == ["cuda:2", "cuda:3"]


def test_neuron_cores_stay_exclusive_among_peers() -> None:
    from accelkit.host import load_snapshot

    node = accelkit.detect_node(load_snapshot(ROOT / "examples" / "nodes" / "neuron-trn1-32xlarge"))
    allocator = accelkit.Allocator(node)
    first, second = allocator.acquire({"neuron_cores": 2}), allocator.acquire({"neuron_cores": 2})
    assert first is not None and second is not None
    env = second.env({}, peers=[first])
    assert env["NEURON_RT_VISIBLE_CORES"] == "2-3"
    assert not any(k.startswith("ACCELKIT_LOCAL_DEVICES") for k in env)


def run_example(*args: str, machine: Optional[dict[str, str]] = None) -> list[dict[str, object]]:
    """What each worker of ``examples/training/plan_and_run.py ARGS`` reported, run with the
    variables ``machine`` added to this process's environment."""
    result = subprocess.run(
        [sys.executable, "examples/training/plan_and_run.py", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(machine or {})},
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_the_example_places_four_workers_of_two_gpus_each() -> None:
    reports = run_example("--workers", "4", "--gpus", "2")
    assert [r["rank"] for r in reports] == [0, 1, 2, 3]
    assert [r["devices"] for r in reports] == [
        ["cuda:0", "cuda:1"],
        ["cuda:2", "cuda:3"],
        ["cuda:4", "cuda:5"],
        ["cuda:6", "cuda:7"],
    ]
    assert {r["backend"] for r in reports} == {"nccl"}
    assert {r["visible"] for r in reports} == {"0,1,2,3,4,5,6,7"}


def test_the_example_runs_two_slices_of_the_recorded_tpu_host() -> None:
    """Two v6e-8 slices (one host each), each worker on 4 of its host's 8 chips."""
    reports = run_example("--tpu-slices", "2")
    assert [(r["rank"], r["slice"]) for r in reports] == [(0, 0), (1, 1)]
    assert [r["devices"] for r in reports] == [["xla:0", "xla:1", "xla:2", "xla:3"]] * 2
    assert {r["visible"] for r in reports} == {"0,1,2,3"}
    assert {r["backend"] for r in reports} == {"xla"}
    whole_hosts = run_example("--tpu-slices", "2", "--chips", "0")
    assert [(r["slice"], r["visible"]) for r in whole_hosts] == [(0, None), (1, None)]


MACHINE_INSIDE_A_JOB = {
    "CUDA_VISIBLE_DEVICES": "5",
    "ACCELKIT_LOCAL_DEVICES_NVIDIA": "1",
    "ROCR_VISIBLE_DEVICES": "0",
    "ONEAPI_DEVICE_SELECTOR": "level_zero:0",
    "ZE_AFFINITY_MASK": "0",
    "NEURON_RT_VISIBLE_CORES": "0-3",
    "TPU_VISIBLE_CHIPS": "0",
    "HABANA_VISIBLE_MODULES": "0,1",
    "ASCEND_RT_VISIBLE_DEVICES": "0",
}
"""Visibility variables of every built-in family, as a shell inside another job has some."""


def test_the_examples_workers_inherit_no_visibility_of_the_machine_it_runs_on() -> None:
    """The workers run on the recorded node: a restriction of the machine the example is started
    on (a ``NEURON_RT_VISIBLE_CORES`` of the shell) would make a GPU worker report Neuron cores
    as its own too. Each sees its grant's devices alone, whichever family it uses."""
    gpus = run_example("--workers", "2", "--gpus", "1", machine=MACHINE_INSIDE_A_JOB)
    assert [r["devices"] for r in gpus] == [["cuda:0"], ["cuda:1"]]
    assert {r["visible"] for r in gpus} == {"0,1"}
    chips = run_example("--tpu-slices", "2", machine=MACHINE_INSIDE_A_JOB)
    assert [r["devices"] for r in chips] == [["xla:0", "xla:1", "xla:2", "xla:3"]] * 2
    assert {r["visible"] for r in chips} == {"0,1,2,3"}


class SloppyManager(accelkit.AcceleratorManager):
    """A third-party family written for contract version 1, whose quantity rule in code answers
    garbage."""

    name = "sloppy"
    resource_name = "SLOPPY"
    visible_devices_env_var = "SLOPPY_VISIBLE_DEVICES"

    def detect(self, host: accelkit.Host) -> list[accelkit.Device]:
        return []

    def validate_quantity(self, quantity: object) -> int:
        return "lots"  # type: ignore[return-value]


class SloppyPlugin:
    @accelkit.hookimpl
    def accelkit_register_managers(self) -> list[accelkit.AcceleratorManager]:
        return [SloppyManager()]


def test_a_version_1_quantity_rule_in_code_is_not_called_plans_follow_the_declarations() -> None:
    plugins = accelkit.Registry([SloppyPlugin()], autoload=False)
    with pytest.warns(accelkit.PluginWarning, match="validate_quantity override"):
        plan = ScalingConfig(
            2, accelerator="sloppy", resources_per_worker={"SLOPPY": 0.5}, registry=plugins
        )
    assert plan.per_worker_resources == {"CPU": 1.0, "SLOPPY": 0.5}
    [info] = plugins.report()
    assert (
        "validate_quantity override -> fractional and scheduling.allowed_quantities"
        in (info.notes[0])
    )
