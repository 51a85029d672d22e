"""accelkit-metax: the conformance kit, each detection layer, the CUDA_VISIBLE_DEVICES claim,
MACA_VISIBLE_DEVICES beside it, and the recorded node."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import accelkit
import accelkit_metax
import pytest
from accelkit import FakeHost, load_snapshot
from accelkit.node import record_snapshot
from accelkit.runtime import devices
from accelkit.scaling import ScalingConfig
from accelkit.testing import AcceleratorManagerSuite, fake_gpus, fake_pynvml
from accelkit_metax import MetaxManager
from accelkit_metax.testing import LIST_ARGV, fake_mxsml, make_host, mx_smi_list

NODE = Path(__file__).resolve().parents[1] / "nodes" / "metax-c500-8"


class TestMetax(AcceleratorManagerSuite):
    """The whole kit: contract, detection, visibility round trip, placement, packaging."""

    manager_class = MetaxManager

    def make_host(self, count: int, root: Path) -> FakeHost:
        return make_host(count, root)


def metax_host(count: int, env: dict[str, str], nvidia: int = 0) -> FakeHost:
    """``count`` MetaX GPUs (mx-smi) and ``nvidia`` NVIDIA GPUs (NVML) under ``env``."""
    modules = {"pynvml": fake_pynvml(fake_gpus(nvidia))} if nvidia else {}
    return FakeHost(env=env, commands={LIST_ARGV: (0, mx_smi_list(count))}, modules=modules)


def test_metax_gpus_claim_cuda_visible_devices_and_nvidia_makes_no_stand_ins() -> None:
    node = accelkit.detect_node(metax_host(4, {"CUDA_VISIBLE_DEVICES": "1,2"}))
    assert [(d.family, d.id) for d in node.devices] == [("metax", "1"), ("metax", "2")]
    assert node.resources == {"GPU": 2.0, "accelerator_type:MXC500": 1.0}
    claims = [d.message for d in node.diagnostics if d.family == "nvidia"]
    assert any("CUDA_VISIBLE_DEVICES is claimed by the metax family" in n for n in claims)


def test_an_override_on_a_metax_node_counts_metax_gpus_not_nvidia_stand_ins() -> None:
    node = accelkit.detect_node(metax_host(2, {"CUDA_VISIBLE_DEVICES": "0,1"}), {"GPU": 2})
    assert [(d.family, d.id) for d in node.devices] == [("metax", "0"), ("metax", "1")]


def test_nvidia_and_metax_gpus_on_one_node_are_an_error_naming_both_claims() -> None:
    with pytest.raises(accelkit.ConfigurationError) as error:
        accelkit.detect_node(metax_host(2, {}, nvidia=2))
    message = str(error.value)
    assert "CUDA_VISIBLE_DEVICES" in message
    assert "metax" in message and "nvidia" in message


def test_without_metax_gpus_cuda_visible_devices_stays_nvidias() -> None:
    node = accelkit.detect_node(metax_host(0, {"CUDA_VISIBLE_DEVICES": "2,3"}), {"GPU": 2})
    assert [(d.family, d.id) for d in node.devices] == [("nvidia", "2"), ("nvidia", "3")]


def test_a_grant_writes_cuda_visible_devices_for_metax_gpus() -> None:
    node = accelkit.detect_node(metax_host(4, {}))
    allocator = accelkit.Allocator(node)
    half = allocator.acquire({"GPU": 0.5})
    pair = allocator.acquire({"GPU": 2})
    assert half is not None and pair is not None
    assert half.env()["CUDA_VISIBLE_DEVICES"] == "0"
    assert pair.env()["CUDA_VISIBLE_DEVICES"] == "1,2"
    assert accelkit.visible_ids(env=pair.env())["metax"] == ["1", "2"]
    assert devices(env=pair.env()) == ["cuda:0", "cuda:1"]  # once each, torch.cuda's names
    assert devices(env=pair.env(), grant=pair) == ["cuda:0", "cuda:1"]  # as the granted family's


def test_the_library_layer_reads_mxsml_with_cuda_visible_devices_lifted() -> None:
    mxsml = fake_mxsml(2)
    host = FakeHost(
        env={"CUDA_VISIBLE_DEVICES": "1"},
        modules={"pymxsml": mxsml, "pymxsml.mxsml_extension": mxsml},
    )
    devices = MetaxManager().detect(host)
    assert [(d.id, d.model, d.type_label, d.pci_bus_id, d.source) for d in devices] == [
        ("0", "MXC500", "MXC500", "0000:0f:00.0", "library"),
        ("1", "MXC500", "MXC500", "0000:10:00.0", "library"),
    ]
    assert mxsml.calls == {"mxSmlExInit": 1, "mxSmlExShutdown": 1}
    assert host.probe_envs == [{"CUDA_VISIBLE_DEVICES": None}]


def test_mxsml_without_a_driver_is_information_and_mx_smi_answers() -> None:
    mxsml = fake_mxsml(2, init_error=9)  # MXSMLEX_ERROR_DRIVER_NOT_LOADED
    host = FakeHost(
        commands={LIST_ARGV: (0, mx_smi_list(1, "MXC550"))},
        modules={"pymxsml": mxsml, "pymxsml.mxsml_extension": mxsml},
    )
    node = accelkit.detect_node(host)
    assert [(d.id, d.type_label, d.source) for d in node.devices] == [("0", "MXC550", "command")]
    notes = [d for d in node.diagnostics if d.family == "metax" and "did not start" in d.message]
    assert [d.level for d in notes] == ["info"]


@pytest.mark.parametrize(
    ("name", "label"), [("MXC500", "MXC500"), ("MetaX C550", "MXC550"), ("MXC600-AL", "MXC600-AL")]
)
def test_type_labels_are_metax_product_names(name: str, label: str) -> None:
    host = FakeHost(commands={LIST_ARGV: (0, f"GPU#0  {name}  0000:0f:00.0  Available\n")})
    assert [d.type_label for d in MetaxManager().detect(host)] == [label]


def test_the_recorded_node_replays() -> None:
    node = accelkit.detect_node(host=load_snapshot(NODE))
    assert node.resources == {"GPU": 8.0, "accelerator_type:MXC500": 1.0}
    assert node.labels["accelkit/metax.count"] == "8"


def test_the_recorded_node_is_what_the_fakes_record(tmp_path: Path) -> None:
    """nodes/ is make_host(8) recorded with this plugin alone: re-recording gives the same."""
    (tmp_path / "root").mkdir()
    plugin = accelkit.Registry([accelkit_metax], autoload=False)
    fresh = record_snapshot(tmp_path / "node", make_host(8, tmp_path / "root"), registry=plugin)
    manifest = "snapshot.json"
    assert json.loads((fresh / manifest).read_text()) == json.loads((NODE / manifest).read_text())
    files = sorted(p.relative_to(fresh).as_posix() for p in fresh.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(NODE).as_posix() for p in NODE.rglob("*") if p.is_file())


def test_collectives_use_nccl_which_maca_serves_with_mccl() -> None:
    """vLLM-metax declares ``dist_backend = "nccl"`` and maps NCCL's calls onto MCCL: a training
    plan on MetaX GPUs names nccl, not gloo."""
    assert ScalingConfig(num_workers=2, accelerator="metax").backend == "nccl"


# -- MACA_VISIBLE_DEVICES beside CUDA_VISIBLE_DEVICES ----------------------------------------------
# MetaX's PyTorch (MetaX-MACA/mcPytorch, branch 2.4, torch/cuda/__init__.py, _parse_visible_devices)
# reads `os.getenv("MACA_VISIBLE_DEVICES") or os.getenv("CUDA_VISIBLE_DEVICES")`; MetaX's vLLM
# platform writes MACA_VISIBLE_DEVICES with CUDA_VISIBLE_DEVICES's value on every worker.
@pytest.mark.parametrize(
    ("env", "ids"),
    [
        ({}, None),
        ({"CUDA_VISIBLE_DEVICES": "1,2"}, ["1", "2"]),  # as before
        ({"MACA_VISIBLE_DEVICES": "3"}, ["3"]),  # MetaX's own variable alone
        ({"MACA_VISIBLE_DEVICES": " 3 , 0"}, ["3", "0"]),
        ({"MACA_VISIBLE_DEVICES": "NoDevFiles"}, []),
        ({"MACA_VISIBLE_DEVICES": "3", "CUDA_VISIBLE_DEVICES": "3"}, ["3"]),
        ({"MACA_VISIBLE_DEVICES": "3", "CUDA_VISIBLE_DEVICES": "1,2"}, ["3"]),  # MACA_ first
        ({"MACA_VISIBLE_DEVICES": "", "CUDA_VISIBLE_DEVICES": "1"}, ["1"]),  # "" gives way
        ({"MACA_VISIBLE_DEVICES": ""}, None),  # "" or None: unset to mcPytorch
        ({"MACA_VISIBLE_DEVICES": "3", "CUDA_VISIBLE_DEVICES": ""}, ["3"]),
    ],
)
def test_maca_visible_devices_is_read_as_mcpytorch_reads_it(
    env: dict[str, str], ids: Optional[list[str]]
) -> None:
    assert MetaxManager().read_visible(env) == ids


def test_maca_visible_devices_alone_restricts_the_node() -> None:
    node = accelkit.detect_node(metax_host(4, {"MACA_VISIBLE_DEVICES": "3,1"}))
    assert [(d.family, d.id) for d in node.devices] == [("metax", "3"), ("metax", "1")]
    assert not [d for d in node.diagnostics if d.level == "warning"]


def test_the_two_variables_differing_is_a_warning_and_maca_visible_devices_is_read() -> None:
    env = {"MACA_VISIBLE_DEVICES": "3", "CUDA_VISIBLE_DEVICES": "1,2"}
    node = accelkit.detect_node(metax_host(4, env))
    assert [(d.family, d.id) for d in node.devices] == [("metax", "3")]
    warnings = [d.message for d in node.diagnostics if d.family == "metax" and d.level == "warning"]
    assert warnings == [
        "MACA_VISIBLE_DEVICES='3' and CUDA_VISIBLE_DEVICES='1,2' differ: read as mcPytorch does; "
        "the MACA runtime's choice is not confirmed"
    ]


def test_an_empty_maca_visible_devices_beside_cuda_visible_devices_is_a_warning() -> None:
    env = {"MACA_VISIBLE_DEVICES": "", "CUDA_VISIBLE_DEVICES": "1"}
    node = accelkit.detect_node(metax_host(4, env))
    assert [d.id for d in node.devices] == ["1"]  # mcPytorch: "" or "1"
    warnings = [d.message for d in node.diagnostics if d.family == "metax" and d.level == "warning"]
    assert len(warnings) == 1 and "the MACA runtime's choice is not confirmed" in warnings[0]


def test_the_two_variables_alike_leave_no_warning() -> None:
    env = {"MACA_VISIBLE_DEVICES": "0, 2", "CUDA_VISIBLE_DEVICES": "0,2"}
    node = accelkit.detect_node(metax_host(4, env))
    assert [d.id for d in node.devices] == ["0", "2"]
    assert not [d for d in node.diagnostics if d.level == "warning"]


def test_a_grant_writes_both_variables_and_overrides_inherited_ones() -> None:
    node = accelkit.detect_node(metax_host(4, {}))
    grant = accelkit.Allocator(node).acquire({"GPU": 2})
    assert grant is not None
    assert grant.env() == {"CUDA_VISIBLE_DEVICES": "0,1", "MACA_VISIBLE_DEVICES": "0,1"}
    inherited = {"MACA_VISIBLE_DEVICES": "7", "CUDA_VISIBLE_DEVICES": "6"}
    worker = {**inherited, **grant.env()}
    assert accelkit.visible_ids(env=worker)["metax"] == ["0", "1"]
    assert MetaxManager().env_vars_read == ("CUDA_VISIBLE_DEVICES", "MACA_VISIBLE_DEVICES")
    nothing = MetaxManager().visibility_env([], total=4)
    assert nothing == {"CUDA_VISIBLE_DEVICES": "", "MACA_VISIBLE_DEVICES": ""}
    assert MetaxManager().read_visible(nothing) == []
