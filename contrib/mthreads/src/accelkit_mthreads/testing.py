"""Fake Moore Threads hosts, for tests and for ``accelkit check mthreads`` (``accelkit.testing``).

``mthreads-gmi -q --json`` prints a JSON object: driver facts at the top, a ``GPU`` list with each
GPU's ``Index``, ``Product Name``, ``GPU UUID``, ``PCI`` (``Bus ID``, ``Vendor ID`` 0x1ED5) and
``FB Memory Usage`` (the shape of the real-world excerpts the README cites). Each card is also
a PCI function of vendor 0x1ed5, class 0x0300 (display), beside its audio function.
"""

from __future__ import annotations

import json
from pathlib import Path

from accelkit import FakeHost

__all__ = ["MODEL", "QUERY_ARGV", "gmi_json", "make_host", "write_pci"]

QUERY_ARGV = ("mthreads-gmi", "-q", "--json")
MODEL = "MTT S4000"
BUSES = (0x12, 0x13, 0x48, 0x49, 0x89, 0x8A, 0xC1, 0xC2)


def bus_id(index: int) -> str:
    """The PCI address of GPU ``index``."""
    return f"0000:{BUSES[index % len(BUSES)]:02x}:00.0"


def gmi_json(count: int, model: str = MODEL) -> str:
    """What ``mthreads-gmi -q --json`` prints for ``count`` idle GPUs."""
    gpus = [
        {
            "Index": str(index),
            "Product Name": model,
            "Product Brand": "MTT",
            "GPU UUID": f"bf1da7bf-0d1e-4c2a-8e3f-{index:012x}",
            "Serial Number": f"MY1VE{index:07d}",
            "MTBios Version": "3.4.8",
            "PCI": {"Bus ID": "0000" + bus_id(index), "Vendor ID": "0x1ED5", "Device ID": "0x0327"},
            "FB Memory Usage": {"Total": "49152MiB", "Used": "0MiB", "Free": "49152MiB"},
        }
        for index in range(count)
    ]
    top = {"Driver Version": "1.2.0", "Attached GPUs": str(count), "GPU": gpus}
    return json.dumps(top, indent=4)


def write_pci(root: Path, count: int) -> None:
    """Each card's display function and audio function, vendor 0x1ed5, under ``root``."""
    for index in range(count):
        display = bus_id(index)
        audio = display[:-1] + "1"
        for address, klass in ((display, "0x030000"), (audio, "0x040300")):
            function = root / "sys" / "bus" / "pci" / "devices" / address
            function.mkdir(parents=True)
            facts = {"vendor": "0x1ed5", "device": "0x0327", "class": klass, "numa_node": "0"}
            for name, value in facts.items():
                (function / name).write_text(value + "\n")


def make_host(count: int, root: Path) -> FakeHost:
    """A host with ``count`` MTT S4000 GPUs, by PCI and by ``mthreads-gmi -q --json``."""
    write_pci(root, count)
    return FakeHost(root=root, commands={QUERY_ARGV: (0, gmi_json(count))})
