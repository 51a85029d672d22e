"""``accelkit.detect.device_files``: device files traced back to the PCI function behind them;
``numbered_files``: a driver's ``<prefix><N>`` files."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from accelkit import FakeHost
from accelkit.detect import accel_files, device_files, is_index, numbered_files, vfio_files
from accelkit_plugins.tpu import testing as fake
from core_fakes import ReadsRecorded
from hypothesis import given
from hypothesis import strategies as st


def files(root: Path, paths: Iterable[str]) -> FakeHost:
    """A FakeHost whose machine has an empty file at each of ``paths``."""
    for path in paths:
        (root / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (root / path.lstrip("/")).touch()
    return FakeHost(root=root)


def test_numbered_files_are_the_indexes_in_number_order(tmp_path: Path) -> None:
    numbers = (0, 1, 2, 9, 10, 11)
    others = ("davinci", "davinci_manager", "davinci1a", "davinci-3", "davinci\u00b2", "hisi_hdc")
    host = files(tmp_path, [f"/dev/davinci{n}" for n in numbers] + [f"/dev/{o}" for o in others])
    assert numbered_files(host, "/dev/davinci") == [(n, f"/dev/davinci{n}") for n in numbers]


def test_a_prefix_is_taken_as_written_not_as_a_pattern(tmp_path: Path) -> None:
    written = ["/dev/a[b]c0", "/dev/abc1", "/dev/x*y2", "/dev/xzy3", "/dev/q?4", "/dev/qz5"]
    host = files(tmp_path, [*written, "/dev/d[1]/npu6", "/dev/d1/npu7"])
    assert numbered_files(host, "/dev/a[b]c") == [(0, "/dev/a[b]c0")]
    assert numbered_files(host, "/dev/x*y") == [(2, "/dev/x*y2")]
    assert numbered_files(host, "/dev/q?") == [(4, "/dev/q?4")]
    assert numbered_files(host, "/dev/d[1]/npu") == [(6, "/dev/d[1]/npu6")]


def test_a_prefix_may_name_a_directory_or_end_in_one(tmp_path: Path) -> None:
    rngd = ["/dev/rngd/npu0", "/dev/rngd/npu0pe0", "/dev/rngd/npu1mgmt"]
    host = files(tmp_path, [*rngd, "/dev/vfio/vfio", "/dev/vfio/12", "/dev/vfio/3"])
    assert numbered_files(host, "/dev/rngd/npu") == [(0, "/dev/rngd/npu0")]
    assert numbered_files(host, "/dev/vfio/") == [(3, "/dev/vfio/3"), (12, "/dev/vfio/12")]


def test_leading_zeros_are_an_index_too(tmp_path: Path) -> None:
    host = files(tmp_path, ["/dev/x01", "/dev/x1", "/dev/x002"])
    assert numbered_files(host, "/dev/x") == [(1, "/dev/x01"), (1, "/dev/x1"), (2, "/dev/x002")]


def test_no_numbered_files_is_an_empty_list(tmp_path: Path) -> None:
    assert numbered_files(FakeHost(), "/dev/rbln") == []
    assert numbered_files(files(tmp_path, ["/dev/rbln_ctl"]), "/dev/rbln") == []
    assert numbered_files(files(tmp_path, []), "/dev/nowhere/rbln") == []


NAME = st.text("ab_*?[]0123456789", max_size=4)


@given(stem=NAME, names=st.sets(NAME, max_size=8))
def test_numbered_files_keep_exactly_the_names_of_prefix_and_index(
    stem: str, names: set[str]
) -> None:
    with tempfile.TemporaryDirectory() as root:
        host = files(Path(root), (f"/dev/d/{name}" for name in names if name))
        expected = [
            (int(name[len(stem) :]), f"/dev/d/{name}")
            for name in names
            if name.startswith(stem) and is_index(name[len(stem) :])
        ]
        assert numbered_files(host, f"/dev/d/{stem}") == sorted(expected)


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
