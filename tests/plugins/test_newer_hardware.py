"""2025-2026 hardware of Intel (COMBINED hierarchy, Battlemage), Huawei (Ascend A3) and AWS (Trn1
collective sizes)."""

from __future__ import annotations

import pathlib
from pathlib import Path
from typing import Any, Callable

import accelkit
import pytest
from accelkit import FakeHost, InvalidRequest
from accelkit.host import load_snapshot
from accelkit_plugins.ascend import AscendManager
from accelkit_plugins.ascend import testing as ascend_fake
from accelkit_plugins.intel import IntelManager
from accelkit_plugins.intel import testing as intel_fake
from accelkit_plugins.neuron import NeuronManager
from accelkit_plugins.neuron import testing as neuron_fake

NODES = Path(__file__).resolve().parents[2] / "examples" / "nodes"


# -- Intel -----------------------------------------------------------------------------------------
def test_combined_hierarchy_numbers_stacks_as_sycl_does(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    """In COMBINED mode Level Zero shows cards, but ``ONEAPI_DEVICE_SELECTOR`` (SYCL) still
    numbers each stack: ``level_zero:1`` is the second stack of the first Max 1550."""
    cards = intel_fake.fake_cards(5)  # two Max 1550 (2 stacks each), one Max 1100
    env = {"ZE_FLAT_DEVICE_HIERARCHY": "COMBINED"}
    intel_fake.write_sysfs(tmp_path, cards)
    host = FakeHost(
        root=tmp_path,
        env=env,
        commands={intel_fake.XPU_SMI_ARGV: (0, intel_fake.xpu_smi_output(cards))},
    )
    devices, _ = run_detect(IntelManager(), host)
    assert [(d.id, d.pci_bus_id) for d in devices] == [
        ("0", cards[0].bus_id),
        ("1", cards[0].bus_id),
        ("2", cards[1].bus_id),
        ("3", cards[1].bus_id),
        ("4", cards[2].bus_id),
    ]
    node = accelkit.detect_node(host)
    grant = accelkit.Allocator(node).acquire({"GPU": 1}, accelerator_type="Intel-GPU-Max-1100")
    assert grant is not None
    assert grant.env({}, hooks=False)["ONEAPI_DEVICE_SELECTOR"] == "level_zero:4"


def test_composite_hierarchy_still_numbers_cards(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    cards = intel_fake.fake_cards(4)
    intel_fake.write_sysfs(tmp_path, cards)
    commands = {intel_fake.XPU_SMI_ARGV: (0, intel_fake.xpu_smi_output(cards))}
    env = {"ZE_FLAT_DEVICE_HIERARCHY": "COMPOSITE"}
    devices, _ = run_detect(IntelManager(), FakeHost(root=tmp_path, env=env, commands=commands))
    assert [d.id for d in devices] == ["0", "1"]


def test_battlemage_is_labelled_from_its_pci_id(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    b580 = intel_fake.FakeCard("0000:03:00.0", 0xE20B, "Intel(R) Graphics [0xe20b]", driver="xe")
    intel_fake.write_sysfs(tmp_path, [b580], bmc=False)
    devices, _ = run_detect(IntelManager(), FakeHost(root=tmp_path))  # the DRM layer: the id only
    assert [(d.id, d.type_label, d.model) for d in devices] == [("0", "Intel-Arc-B580", "Arc B580")]
    listed = {intel_fake.XPU_SMI_ARGV: (0, intel_fake.xpu_smi_output([b580]))}
    devices, _ = run_detect(IntelManager(), FakeHost(root=tmp_path, commands=listed))
    assert [(d.source, d.type_label) for d in devices] == [("command", "Intel-Arc-B580")]


# -- Ascend A3 -------------------------------------------------------------------------------------
@pytest.mark.parametrize("soc", ["Ascend910_9391", "Ascend910_9392", "Ascend910_9382"])
def test_a3_has_one_label_whichever_layer_answers(tmp_path: pathlib.Path, soc: str) -> None:
    """pyACL names an A3 SoC "Ascend910_93xx"; npu-smi's chip map says "Ascend910", two chips
    to an NPU id: both give "Ascend910C"."""
    npus = [ascend_fake.FakeNpu(n, chips=2, chip_name="Ascend910") for n in range(4)]
    chip_map = {ascend_fake.CHIP_MAP_ARGV: (0, ascend_fake.chip_map_output(npus))}
    by_acl = AscendManager().detect(FakeHost(modules={"acl": ascend_fake.fake_acl(8, soc)}))
    by_npu_smi = AscendManager().detect(FakeHost(commands=chip_map))
    assert [(d.id, d.type_label) for d in by_acl] == [(str(n), "Ascend910C") for n in range(8)]
    assert [(d.id, d.type_label) for d in by_npu_smi] == [(str(n), "Ascend910C") for n in range(8)]
    assert {d.model for d in by_acl} == {soc}  # the exact SoC stays where pyACL gives it
    assert {d.source for d in by_npu_smi} == {"command"}


def test_other_ascend_chips_keep_their_soc_name(tmp_path: pathlib.Path) -> None:
    single = [ascend_fake.FakeNpu(n, chips=1, chip_name="Ascend910") for n in range(2)]
    chip_map = {ascend_fake.CHIP_MAP_ARGV: (0, ascend_fake.chip_map_output(single))}
    assert {d.type_label for d in AscendManager().detect(FakeHost(commands=chip_map))} == {
        "Ascend910"
    }
    acl = AscendManager().detect(FakeHost(modules={"acl": ascend_fake.fake_acl(2, "Ascend910B3")}))
    assert {d.type_label for d in acl} == {"Ascend910B3"}


# -- Neuron Trn1 -----------------------------------------------------------------------------------
def test_trn1_takes_the_core_counts_its_collectives_accept() -> None:
    node = accelkit.detect_node(load_snapshot(NODES / "neuron-trn1-32xlarge"))
    assert node.policies["neuron"].allowed_quantities == (1, 2, 8, 16, 32)
    allocator = accelkit.Allocator(accelkit.Node.from_dict(node.to_dict()))  # no plugin needed
    for cores in (1, 2, 8, 16):
        assert allocator.acquire({"neuron_cores": cores}) is not None
    for cores in (3, 4, 12):
        with pytest.raises(InvalidRequest, match="ask for 1, 2, 8, 16, 32"):
            allocator.acquire({"neuron_cores": cores})


def test_a_whole_trn1_node_is_32_cores(tmp_path: pathlib.Path) -> None:
    node = accelkit.detect_node(neuron_fake.make_host(32, tmp_path))
    grant = accelkit.Allocator(node).acquire({"neuron_cores": 32})
    assert grant is not None and len(grant.ids["neuron_cores"]) == 32


def test_trn2_keeps_any_whole_core_count(tmp_path: pathlib.Path) -> None:
    trn1 = accelkit.detect_node(load_snapshot(NODES / "neuron-trn1-32xlarge"))
    trn2 = accelkit.detect_node(load_snapshot(NODES / "neuron-trn2-48xlarge"))
    assert trn2.policies["neuron"].allowed_quantities is None  # detected after a Trn1: its own
    assert trn1.policies["neuron"].allowed_quantities == (1, 2, 8, 16, 32)
    grant = accelkit.Allocator(trn2).acquire({"neuron_cores": 3})
    assert grant is not None and grant.ids["neuron_cores"] == ["0", "1", "2"]
    assert NeuronManager.scheduling.allowed_quantities is None  # the class declaration stays
