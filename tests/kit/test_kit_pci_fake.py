"""The kit's fake PCI function: the files the kernel shows, where it shows them, and what the
toolkit's PCI readers read back from them."""

from __future__ import annotations

import os
from pathlib import Path

from accelkit import FakeHost
from accelkit.detect import PciDevice, numa_node, pci_device_at, pci_devices
from accelkit.testing import write_pci_function

H100 = "0000:17:00.0"
DEVICE = f"sys/devices/pci0000:00/{H100}"


def contents(root: Path) -> dict[str, str]:
    """Every file and link under ``root``: its text, or ``-> target`` for a link."""
    found = {}
    for path in sorted(root.rglob("*")):
        name = path.relative_to(root).as_posix()
        if path.is_symlink():
            found[name] = f"-> {os.readlink(path)}"
        elif path.is_file():
            found[name] = path.read_text()
    return found


def test_it_writes_the_function_under_its_bridge_and_links_it_from_the_bus(tmp_path: Path) -> None:
    written = write_pci_function(tmp_path, H100, 0x10DE, 0x2330, 0x030200, numa_node=1)
    assert written == tmp_path / DEVICE
    assert contents(tmp_path) == {
        "sys/bus/pci/devices/0000:17:00.0": "-> ../../../devices/pci0000:00/0000:17:00.0",
        f"{DEVICE}/class": "0x030200\n",
        f"{DEVICE}/device": "0x2330\n",
        f"{DEVICE}/numa_node": "1\n",
        f"{DEVICE}/vendor": "0x10de\n",
    }
    assert (tmp_path / "sys/bus/pci/devices" / H100).resolve() == written.resolve()


def test_its_defaults_a_driver_and_extra_files(tmp_path: Path) -> None:
    bus_id = "0001:05:00.0"  # another PCI domain: its own host bridge
    files = {"mem_info_vram_total": "206158430208", "accel/accel0/dev": "261:0"}
    written = write_pci_function(tmp_path, bus_id, 0x1002, 0x74A1, driver="amdgpu", files=files)
    assert written == tmp_path / "sys/devices/pci0001:00" / bus_id
    assert (written / "class").read_text() == "0x120000\n"  # a processing accelerator
    assert (written / "numa_node").read_text() == "0\n"
    assert (written / "mem_info_vram_total").read_text() == "206158430208\n"
    assert (written / "accel/accel0/dev").read_text() == "261:0\n"
    assert os.readlink(written / "driver") == "../../../bus/pci/drivers/amdgpu"
    assert (written / "driver").resolve() == (tmp_path / "sys/bus/pci/drivers/amdgpu").resolve()


def test_writing_twice_and_two_functions_of_one_device_is_fine(tmp_path: Path) -> None:
    first = write_pci_function(tmp_path, "0000:00:05.0", 0x1AE0, 0x0075, driver="vfio-pci")
    before = contents(tmp_path)
    assert write_pci_function(tmp_path, "0000:00:05.0", 0x1AE0, 0x0075, driver="vfio-pci") == first
    assert contents(tmp_path) == before
    write_pci_function(tmp_path, "0000:00:05.1", 0x1AE0, 0x0075, driver="vfio-pci")
    assert sorted(os.listdir(tmp_path / "sys/bus/pci/devices")) == ["0000:00:05.0", "0000:00:05.1"]
    write_pci_function(tmp_path, "0000:00:05.0", 0x1AE0, 0x0075, numa_node=1)  # facts rewritten
    assert (first / "numa_node").read_text() == "1\n"


def test_the_toolkit_reads_back_what_it_wrote(tmp_path: Path) -> None:
    write_pci_function(tmp_path, "0000:03:00.0", 0x1A03, 0x2000, 0x030000, driver="ast")
    write_pci_function(tmp_path, "0000:9a:00.0", 0x10DE, 0x2330, 0x030200, numa_node=1)
    write_pci_function(tmp_path, H100, 0x10DE, 0x2330, 0x030200, numa_node=-1, driver="nvidia")
    host = FakeHost(root=tmp_path)
    path = f"/sys/devices/pci0000:00/{H100}"
    h100 = PciDevice(H100, 0x10DE, 0x2330, 0x030200, "nvidia", None, path)
    assert pci_device_at(host, f"/sys/bus/pci/devices/{H100}") == h100
    assert pci_devices(host, 0x10DE) == [
        h100,
        PciDevice("0000:9a:00.0", 0x10DE, 0x2330, 0x030200, None, 1, path[:-12] + "0000:9a:00.0"),
    ]
    assert [d.bus_id for d in pci_devices(host, 0x1A03)] == ["0000:03:00.0"]
    assert numa_node(host, "00000000:9A:00.0") == 1
    assert numa_node(host, H100) is None  # -1: a machine without NUMA
