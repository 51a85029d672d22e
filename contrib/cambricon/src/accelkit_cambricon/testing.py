"""Fake Cambricon hosts, for tests and for ``accelkit check cambricon`` (``accelkit.testing``).

``cnmon info`` prints a ``Card <N>`` block per MLU, ``key : value`` lines indented by section
(the layout of CNMON v5 that the cnmon readers cited in the README parse); the driver makes
``/dev/cambricon_dev<N>`` per card and one ``/dev/cambricon_ctl``.
"""

from __future__ import annotations

from pathlib import Path

from accelkit import FakeHost

__all__ = ["INFO_ARGV", "MODEL", "cnmon_info", "make_host", "write_devices"]

INFO_ARGV = ("cnmon", "info")
MODEL = "MLU370-X8"
BUSES = (0x1A, 0x1B, 0x3D, 0x3E, 0x9C, 0x9D, 0xBB, 0xBC)


def cnmon_info(count: int, model: str = MODEL) -> str:
    """What ``cnmon info`` prints for ``count`` idle MLUs."""
    cards = "".join(
        f"""Card {index}
    Product Name                   : {model}
    UUID                           : 77013006-2457-0000-0000-{index:012d}
    Driver                         : v5.10.22
    Health State                   :
        Device                     : Good
        Driver                     : Running
    Utilization                    :
        MLU Average                : 0 %
    Physical Memory Usage          :
        Total                      : 48000 MiB
        Used                       : 0 MiB
        Free                       : 48000 MiB
    Power                          :
        Usage                      : 38 W
        Cap                        : 250 W
    PCI                            :
        Domain ID                  : 0000
        Bus num                    : {BUSES[index % len(BUSES)]:02X}
        Device                     : 00
        Function                   : 0
    Processes                      :
"""
        for index in range(count)
    )
    return "================CNMON v5.10.22================\n" + cards


def write_devices(root: Path, count: int) -> None:
    """The driver's ``/dev/cambricon_dev<N>`` files and its ``/dev/cambricon_ctl``."""
    (root / "dev").mkdir(parents=True, exist_ok=True)
    (root / "dev" / "cambricon_ctl").write_text("")
    for index in range(count):
        (root / "dev" / f"cambricon_dev{index}").write_text("")


def make_host(count: int, root: Path) -> FakeHost:
    """A host with ``count`` MLU370-X8 cards, by their device files and by ``cnmon info`` (no
    cards: no driver, no cnmon)."""
    if count == 0:
        return FakeHost(root=root)
    write_devices(root, count)
    return FakeHost(root=root, commands={INFO_ARGV: (0, cnmon_info(count))})
