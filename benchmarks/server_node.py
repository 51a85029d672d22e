"""Detection on a server: does `accelkit ls` cost more where the machine holds more?

Run: ``python benchmarks/server_node.py [--functions N] [--dev-entries D] [--rounds R]``.

The example nodes record only what their vendor's detection read, so none holds a whole PCI
bus or ``/dev``. A server has hundreds of PCI functions (bridges, switches, NICs, NVMe) and
thousands of device files (terminals, loop devices, disks), and detection looks there: TPU on
the bus on every machine without TPU device files, AMD and Intel through DRM, TPU, Ascend and
contrib plugins in ``/dev``. This writes, in a temporary directory, the example
``nvidia-h100-8gpu`` node on such a server: ``N`` functions (its 8 GPUs among them) under
``/sys/bus/pci/devices``, the card and render node nvidia-drm makes per GPU under
``/sys/class/drm``, the kernel's one-file listing of the functions, ``/proc/bus/pci/devices``,
and ``D`` entries in ``/dev``. Each round then starts, as its own process and in the same order:

- ``bare``: ``python -c pass``;
- ``recorded``: ``accelkit ls --json --host`` the example node as recorded;
- ``server``: the same on the node on a server;
- ``server, no listing``: the same without ``/proc/bus/pci/devices`` (a container that hides
  it, or a snapshot recorded by an accelkit that did not read it): every function is read.

Figures are medians over the rounds; ``server / recorded`` is what the server adds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RECORDED = ROOT / "examples" / "nodes" / "nvidia-h100-8gpu"
NVIDIA, INTEL, MELLANOX = 0x10DE, 0x8086, 0x15B3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--functions", type=int, default=300, help="PCI functions on the bus")
    parser.add_argument("--dev-entries", type=int, default=2000, help="entries in /dev")
    parser.add_argument("--rounds", type=int, default=21)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        listed = Path(scratch) / "server"
        unlisted = Path(scratch) / "server-no-listing"
        write_node(listed, args.functions, args.dev_entries, listing=True)
        write_node(unlisted, args.functions, args.dev_entries, listing=False)
        ls = [sys.executable, "-m", "accelkit.cli", "ls", "--json", "--host"]
        commands = {
            "bare": [sys.executable, "-c", "pass"],
            "recorded": [*ls, str(RECORDED)],
            "server": [*ls, str(listed)],
            "server, no listing": [*ls, str(unlisted)],
        }
        times = timed(commands, args.rounds)
    bare, recorded = times["bare"], times["recorded"]
    print(
        f"{args.rounds} rounds, medians; {args.functions} PCI functions, "
        f"{args.dev_entries} entries in /dev"
    )
    for name, milliseconds in times.items():
        print(
            f"  {name:18s} {milliseconds:7.1f} ms  {milliseconds / bare:5.2f}x bare  "
            f"{milliseconds / recorded:5.2f}x recorded"
        )


def timed(commands: dict[str, list[str]], rounds: int) -> dict[str, float]:
    """The median wall time of each command, started once a round in the order given."""
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(rounds):
        for name, argv in commands.items():
            start = time.perf_counter()
            subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            samples[name].append((time.perf_counter() - start) * 1000)
    return {name: statistics.median(values) for name, values in samples.items()}


def write_node(directory: Path, functions: int, dev_entries: int, *, listing: bool) -> None:
    """The recorded H100 node on a server (see above)."""
    shutil.copytree(RECORDED, directory, symlinks=True)
    root = directory / "root"
    snapshot = json.loads((RECORDED / "snapshot.json").read_text())
    gpus = gpu_bus_ids(snapshot)
    bus = dict.fromkeys(gpus, NVIDIA)
    number = 0
    while len(bus) < functions:
        bus_id = f"0000:{0x20 + number // 8:02x}:{number % 8 // 2:02x}.{number % 2}"
        bus.setdefault(bus_id, MELLANOX if number % 5 == 0 else INTEL)
        number += 1
    lines = []
    for bus_id, vendor in sorted(bus.items()):
        function = root / "sys/devices/pci0000:00" / bus_id
        function.mkdir(parents=True, exist_ok=True)
        for name, value in (("vendor", vendor), ("device", 0x2330), ("class", 0x030200)):
            (function / name).write_text(f"0x{value:04x}\n")
        link = root / "sys/bus/pci/devices" / bus_id
        link.parent.mkdir(parents=True, exist_ok=True)
        if not os.path.lexists(link):
            link.symlink_to(f"../../../devices/pci0000:00/{bus_id}")
        number, slot, function_number = int(bus_id[5:7], 16), int(bus_id[8:10], 16), bus_id[11]
        lines.append(f"{number:02x}{slot << 3 | int(function_number):02x}\t{vendor:04x}2330\t0\n")
    for index, bus_id in enumerate(gpus):
        for node in (f"card{index}", f"renderD{128 + index}"):
            (root / "sys/class/drm" / node).mkdir(parents=True)
            (root / "sys/class/drm" / node / "device").symlink_to(
                f"../../../devices/pci0000:00/{bus_id}"
            )
    if listing:
        (root / "proc/bus/pci").mkdir(parents=True)
        (root / "proc/bus/pci/devices").write_text("".join(lines))
    write_dev(root / "dev", dev_entries)


def write_dev(dev: Path, entries: int) -> None:
    """``entries`` device files as a server's ``/dev`` names them (placeholders: only names are
    looked at), the GPUs' ``nvidia<N>`` among them."""
    dev.mkdir(parents=True, exist_ok=True)
    names = ["nvidiactl", "nvidia-uvm", *(f"nvidia{n}" for n in range(8))]
    kinds = ("tty", "loop", "nvme0n1p", "sd", "vcs", "hidraw")
    number = 0
    while len(names) < entries:
        names.append(f"{kinds[number % len(kinds)]}{number // len(kinds)}")
        number += 1
    for name in names:
        (dev / name).touch()


def gpu_bus_ids(snapshot: dict[str, Any]) -> list[str]:
    """The bus ids ``nvidia-smi`` reported in the recorded node, as sysfs names them."""
    output = snapshot["commands"][0]["stdout"]
    return [line.split(", ")[4][4:].lower() for line in output.splitlines() if line.strip()]


if __name__ == "__main__":
    main()
