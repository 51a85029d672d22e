"""TPU7x (Ironwood): a chip exposes two PCI functions and is one chip; chips per host come from
the generation table, never from counting functions."""

from __future__ import annotations

from pathlib import Path

import accelkit
import pytest
from accelkit.diagnostics import collecting
from accelkit_plugins.tpu import TpuManager
from accelkit_plugins.tpu import testing as fake
from accelkit_plugins.tpu.generations import TPU_GENERATIONS

MANAGER = TpuManager()
TPU7X = 0x0076
IRONWOOD_POD = {
    "TPU_ACCELERATOR_TYPE": "tpu7x-8",
    "TPU_TOPOLOGY": "2x2x1",
    "TPU_WORKER_ID": "0",
    "TPU_NAME": "ironwood",
}


def ironwood_host(root: Path, chips: int = 4, functions: int = 2) -> accelkit.FakeHost:
    """A TPU7x VM: ``chips`` chips of ``functions`` VFIO functions each, and the virtual NIC."""
    fake.write_pci_function(root, fake.GVNIC_BUS_ID, fake.GOOGLE, 0x0042, 0x020000)
    fake.write_chips(root, chips, device=TPU7X, functions=functions)
    return accelkit.FakeHost(root=root, env=IRONWOOD_POD)


def detect(host: accelkit.FakeHost) -> tuple[list[accelkit.Device], list[str]]:
    with collecting("tpu") as notes:
        devices = MANAGER.detect(host)
    return devices, [f"{n.level}: {n.message}" for n in notes]


def test_a_chip_with_two_vfio_functions_is_one_chip(tmp_path: Path) -> None:
    devices, notes = detect(ironwood_host(tmp_path))
    assert [d.id for d in devices] == ["0", "1", "2", "3"]
    assert [d.pci_bus_id for d in devices] == [fake.chip_bus_id(n) for n in range(4)]
    assert {d.type_label for d in devices} == {"TPU-V7X"}
    assert not [n for n in notes if n.startswith("warning")]


def test_a_tpu7x_8_host_offers_4_chips_and_a_4_chip_grant_is_the_whole_host(
    tmp_path: Path,
) -> None:
    node = accelkit.detect_node(ironwood_host(tmp_path))
    assert node.resources["TPU"] == 4.0
    assert node.labels["accelkit/tpu.chips-per-host"] == "4"
    assert node.labels["accelkit/tpu.chips-per-pod"] == "4"
    assert node.resources["TPU-v7x-8-head"] == 1.0
    grant = accelkit.Allocator(node).acquire({"TPU": 4})
    assert grant is not None
    assert grant.ids == {"TPU": ["0", "1", "2", "3"]}
    assert {d.pci_bus_id for d, _ in grant.devices} == {fake.chip_bus_id(n) for n in range(4)}
    env = grant.env({}, hooks=False)
    assert env["TPU_VISIBLE_CHIPS"] is None  # the whole host: libtpu's defaults


def test_the_pci_layer_counts_chips_the_same_way(tmp_path: Path) -> None:
    host = ironwood_host(tmp_path)
    for group in (tmp_path / "dev/vfio").iterdir():
        group.unlink()
    devices, notes = detect(host)
    assert [(d.id, d.source) for d in devices] == [(str(n), "sysfs") for n in range(4)]
    assert any("no /dev/accel* or /dev/vfio/* file opens them" in n for n in notes)


def test_chips_per_host_come_from_the_generation_table_not_a_count() -> None:
    host = accelkit.FakeHost(env=IRONWOOD_POD)
    two = [accelkit.Device(str(n)) for n in range(2)]  # e.g. what TPU_VISIBLE_CHIPS left
    assert MANAGER.labels(two, host)["chips-per-host"] == "4"
    v6e = accelkit.FakeHost(env={"TPU_ACCELERATOR_TYPE": "v6e-16", "TPU_TOPOLOGY": "4x4"})
    assert MANAGER.labels(two, v6e)["chips-per-host"] == "4"
    no_slice = accelkit.FakeHost(env={})
    assert MANAGER.labels(two, no_slice)["chips-per-host"] == "2"  # nothing else to go by


def test_the_table_knows_ironwood_chips() -> None:
    ironwood = TPU_GENERATIONS["v7x"]
    assert (ironwood.functions_per_chip, ironwood.chips_per_host) == (2, 4)
    assert TPU_GENERATIONS["v6e"].chips_per_host == 8
    assert {g.functions_per_chip for n, g in TPU_GENERATIONS.items() if n != "v7x"} == {1}


@pytest.mark.parametrize(
    ("chips", "functions", "warning"),
    [
        (4, 1, "TPU v7x chips expose 2 PCI function(s) each, but the chip(s) at 0000:00:05"),
        (6, 2, "6 TPU v7x chips found, but a v7x host has at most 4"),
    ],
)
def test_a_host_that_disagrees_with_the_table_is_reported(
    tmp_path: Path, chips: int, functions: int, warning: str
) -> None:
    devices, notes = detect(ironwood_host(tmp_path, chips, functions))
    assert len(devices) == chips  # what the PCI devices show; nothing "corrected"
    assert any(n.startswith(f"warning: {warning}") for n in notes)


def test_single_function_chips_are_unchanged(tmp_path: Path) -> None:
    devices, notes = detect(fake.make_host(8, tmp_path))
    assert [d.id for d in devices] == [str(n) for n in range(8)]
    assert not [n for n in notes if n.startswith("warning")]
