"""The node snapshots shipped in ``examples/nodes``: each shows the right devices, types and
resources, through the API and through ``accelkit ls --host`` as a person runs it."""

from __future__ import annotations

import json
from pathlib import Path

import accelkit
import pytest
from accelkit.cli import main
from accelkit.host import load_snapshot

NODES = Path(__file__).resolve().parents[2] / "examples" / "nodes"

# name -> ({family: (device count, type label, source)}, the node's resources, exactly)
EXPECTED: dict[str, tuple[dict[str, tuple[int, str, str]], dict[str, float]]] = {
    "nvidia-h100-8gpu": (
        {"nvidia": (8, "H100", "command")},
        {"GPU": 8, "accelerator_type:H100": 1},
    ),
    "nvidia-h100-1gpu": (  # recorded on a real H100 (driver 580, CUDA 13)
        {"nvidia": (1, "H100", "command")},
        {"GPU": 1, "accelerator_type:H100": 1},
    ),
    "nvidia-h200-1gpu": (  # recorded on a real H200 (driver 580, CUDA 13), 141 GB of HBM3e
        {"nvidia": (1, "H200", "command")},
        {"GPU": 1, "accelerator_type:H200": 1},
    ),
    "amd-mi300x-8gpu": (
        {"amd": (8, "AMD-Instinct-MI300X-OAM", "command")},
        {"GPU": 8, "accelerator_type:AMD-Instinct-MI300X-OAM": 1},
    ),
    "intel-max1550-4gpu": (  # 4 cards, 2 stacks each under the default FLAT hierarchy
        {"intel": (8, "Intel-GPU-Max-1550", "command")},
        {"GPU": 8, "accelerator_type:Intel-GPU-Max-1550": 1},
    ),
    "neuron-trn1-32xlarge": (  # 16 Trainium1 devices of 2 cores
        {"neuron": (32, "aws-neuron-core", "command")},
        {"neuron_cores": 32, "accelerator_type:aws-neuron-core": 1},
    ),
    "neuron-trn2-48xlarge": (  # 16 Trainium2 devices, 8 physical cores each at LNC=2: 4 logical
        {"neuron": (64, "aws-neuron-core", "command")},
        {"neuron_cores": 64, "accelerator_type:aws-neuron-core": 1},
    ),
    "tpu-v6e-8": (
        {"tpu": (8, "TPU-V6E", "devfs")},
        {"TPU": 8, "accelerator_type:TPU-V6E": 1, "example-v6e-8": 1, "TPU-v6e-8-head": 1},
    ),
    "gaudi2-8": (
        {"gaudi": (8, "Intel-GAUDI2", "command")},
        {"HPU": 8, "accelerator_type:Intel-GAUDI2": 1},
    ),
    "ascend-910b-8": (
        {"ascend": (8, "Ascend910B3", "command")},
        {"NPU": 8, "accelerator_type:Ascend910B3": 1},
    ),
    "mixed-nvidia-ascend": (  # two A10s and an Atlas 300I Duo pair (2 chips a card)
        {"nvidia": (2, "A10", "command"), "ascend": (4, "Ascend310P3", "command")},
        {"GPU": 2, "NPU": 4, "accelerator_type:A10": 1, "accelerator_type:Ascend310P3": 1},
    ),
}


def test_every_shipped_snapshot_has_expectations() -> None:
    assert sorted(p.name for p in NODES.iterdir() if p.is_dir()) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_node_has_the_right_devices_types_and_resources(name: str) -> None:
    families, resources = EXPECTED[name]
    # the built-ins alone: a plugin this machine happens to have installed (a broken one is an
    # error of the node) is no part of a shipped node
    builtins = accelkit.Registry(autoload=False)
    node = accelkit.detect_node(load_snapshot(NODES / name), registry=builtins)
    found = {d.family for d in node.devices}
    assert found == set(families)
    for family, (count, label, source) in families.items():
        devices = [d for d in node.devices if d.family == family]
        assert [d.id for d in devices] == [str(n) for n in range(count)]
        assert {(d.type_label, d.source) for d in devices} == {(label, source)}
    assert node.resources == {key: float(value) for key, value in resources.items()}
    problems = [f"{d.family}: {d.message}" for d in node.diagnostics if d.level != "info"]
    assert problems == []  # a healthy node reads without a warning
    messages = [(d.family, d.message) for d in node.diagnostics]
    assert len(messages) == len(set(messages))  # and says nothing twice


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_accelkit_ls_shows_the_node(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    families, resources = EXPECTED[name]
    assert main(["ls", "--host", str(NODES / name)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["FAMILY", "RESOURCE", "ID", "TYPE"]
    for family, (count, label, source) in families.items():
        rows = [line.split() for line in lines[1:] if line.split()[:1] == [family]]
        assert [row[2] for row in rows] == [str(n) for n in range(count)]
        assert {(row[3], row[-1]) for row in rows} == {(label, source)}
    for key, value in resources.items():
        assert f"  {key} = {value}" in lines
    assert main(["ls", "--host", str(NODES / name), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["resources"] == {key: float(value) for key, value in resources.items()}


def test_nvidia_gpus_are_numbered_in_bus_order() -> None:
    node = accelkit.detect_node(load_snapshot(NODES / "nvidia-h100-8gpu"))
    buses = [d.pci_bus_id for d in node.devices if d.family == "nvidia"]
    assert buses == sorted(buses) and all(b and b.startswith("0000:") for b in buses)
    assert [d.numa_node for d in node.devices if d.family == "nvidia"] == [0] * 4 + [1] * 4


def test_gaudi_ids_are_module_ids_not_bus_order() -> None:
    node = accelkit.detect_node(load_snapshot(NODES / "gaudi2-8"))
    by_module = {d.id: d.pci_bus_id for d in node.devices if d.family == "gaudi"}
    assert by_module["0"] == "0000:4d:00.0" and by_module["3"] == "0000:33:00.0"
    assert {d.memory_bytes for d in node.devices if d.family == "gaudi"} == {98304 << 20}


def test_intel_stacks_share_their_card() -> None:
    node = accelkit.detect_node(load_snapshot(NODES / "intel-max1550-4gpu"))
    devices = [d for d in node.devices if d.family == "intel"]
    cards = [d.pci_bus_id for d in devices]
    assert cards == [c for c in dict.fromkeys(cards) for _ in range(2)]
    assert all(d.uuid is None and d.parent is None for d in devices)


def test_neuron_cores_name_their_device_and_share_its_memory() -> None:
    node = accelkit.detect_node(load_snapshot(NODES / "neuron-trn1-32xlarge"))
    cores = [d for d in node.devices if d.family == "neuron"]
    assert [c.parent for c in cores[:4]] == ["neuron0", "neuron0", "neuron1", "neuron1"]
    assert {c.memory_bytes for c in cores} == {16 << 30}
    assert node.labels["accelkit/neuron.devices"] == "16"
    assert node.labels["accelkit/neuron.model"] == "Trainium1"


def test_the_mixed_node_keeps_both_families_apart() -> None:
    node = accelkit.detect_node(load_snapshot(NODES / "mixed-nvidia-ascend"))
    assert [(d.family, d.resource_name) for d in node.devices] == [("nvidia", "GPU")] * 2 + [
        ("ascend", "NPU")
    ] * 4
