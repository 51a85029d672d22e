"""``accelkit.detect.device_files``: device files traced back to the PCI function behind them."""

from __future__ import annotations

import os
from pathlib import Path

from accelkit import FakeHost
from accelkit.detect import accel_files, device_files, vfio_files
from accelkit_plugins.tpu import testing as fake
from core_fakes import ReadsRecorded


def test_vfio_groups_name_their_pci_functions_in_bus_order(tmp_path: Path) -> None:
    fake.write_chips(tmp_path, 3, first_group=10)
    files = vfio_files(FakeHost(root=tmp_path))
    assert [(f.path, f.pci.bus_id, f.pci.vendor) for f in files] == [
        (f"/dev/vfio/{10 + n}", fake.chip_bus_id(n), 0x1AE0) for n in range(3)
    ]


def test_the_vfio_container_file_is_not_a_group(tmp_path: Path) -> None:
    fake.write_chips(tmp_path, 1)
    assert [f.path for f in vfio_files(FakeHost(root=tmp_path))] == ["/dev/vfio/0"]


def test_both_accel_spellings_are_traced_and_filtered_by_vendor(tmp_path: Path) -> None:
    fake.write_chips(tmp_path, 2, vfio=False)
    fake.write_pci_function(tmp_path, "0000:17:00.0", 0x10DE, 0x2901, 0x030200)
    klass = tmp_path / "sys/class/accel/accel7"
    klass.mkdir(parents=True)
    os.symlink("../../../devices/pci0000:00/0000:17:00.0", klass / "device")
    (tmp_path / "dev/accel").mkdir()
    (tmp_path / "dev/accel/accel7").touch()
    host = FakeHost(root=tmp_path)
    assert [(f.path, f.pci.vendor) for f in accel_files(host)] == [
        ("/dev/accel0", 0x1AE0),
        ("/dev/accel1", 0x1AE0),
        ("/dev/accel/accel7", 0x10DE),
    ]
    assert [f.path for f in device_files(host, 0x10DE)] == ["/dev/accel/accel7"]
    assert [f.path for f in device_files(host, 0x1AE0)] == ["/dev/accel0", "/dev/accel1"]


def test_an_accel_file_without_a_pci_vendor_is_left_out(tmp_path: Path) -> None:
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev/accel0").touch()
    assert accel_files(FakeHost(root=tmp_path)) == []


def test_no_files_no_root() -> None:
    assert device_files(FakeHost(), 0x1AE0) == []


def test_no_file_is_traced_for_a_vendor_the_kernel_lists_no_pci_function_of(
    tmp_path: Path,
) -> None:
    fake.write_chips(tmp_path, 2)  # Google's TPU chips behind VFIO groups
    (tmp_path / "proc/bus/pci").mkdir(parents=True)
    listing = tmp_path / "proc/bus/pci/devices"
    listing.write_text("0400\t1ae00063\t0\n0500\t1ae00063\t0\n")
    host = ReadsRecorded(root=tmp_path)
    assert device_files(host, 0x10DE) == []  # no NVIDIA function: no group is read
    assert host.read == ["/proc/bus/pci/devices"]
    assert len(device_files(host, 0x1AE0)) == 2
