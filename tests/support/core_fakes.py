"""Generic managers for the core tests, whose detection uses every Host facility.

The vendor plugins are tested elsewhere; these managers exist so node detection and snapshots can
be tested against known facts, whatever the built-in plugins currently do. (A uniquely named
module rather than conftest.py: several test directories have a conftest.)
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Callable, Optional

from accelkit import hookimpl
from accelkit.detect import detect_layers, parse_csv, read_int, read_value, run_command
from accelkit.device import Device
from accelkit.host import FakeHost, Host
from accelkit.manager import AcceleratorManager


class AcmeManager(AcceleratorManager):
    """A GPU family found by `acme-smi` (CSV), else by sysfs under /sys/class/acme."""

    name = "acme"
    resource_name = "GPU"
    visible_devices_env_var = "ACME_VISIBLE_DEVICES"

    def detect(self, host: Host) -> list[Device]:
        return detect_layers(host, ("command", self._command), ("sysfs", self._sysfs))

    def _command(self, host: Host) -> Optional[list[Device]]:
        rows = parse_csv(run_command(host, ["acme-smi", "--csv"]), 4, "acme-smi")
        if rows is None:
            return None
        return [
            Device(
                id=index,
                uuid=uuid,
                model=model,
                type_label=model.split()[-1],
                memory_bytes=int(mib) << 20,
            )
            for index, uuid, model, mib in rows
        ]

    def _sysfs(self, host: Host) -> Optional[list[Device]]:
        cards = host.glob("/sys/class/acme/card*")
        if not cards:
            return None
        devices = []
        for n, card in enumerate(cards):
            model = read_value(host, f"{card}/device/model") or "Acme X"
            link = host.readlink(f"{card}/device/driver")
            devices.append(
                Device(
                    id=str(n),
                    uuid=read_value(host, f"{card}/device/uuid"),
                    model=model,
                    type_label=model.split()[-1],
                    numa_node=read_int(host, f"{card}/device/numa_node", 10),
                    pci_bus_id=os.path.basename(host.realpath(f"{card}/device") or ""),
                    source="sysfs" if link else "devfs",
                )
            )
        return devices

    def labels(self, devices: Sequence[Device], host: Host) -> dict[str, str]:
        return {"driver": "acme-test"}


class RivalManager(AcceleratorManager):
    """A second GPU family, to test families sharing a resource."""

    name = "rival"
    resource_name = "GPU"
    visible_devices_env_var = "RIVAL_VISIBLE_DEVICES"

    def detect(self, host: Host) -> list[Device]:
        count = read_int(host, "/etc/rival/count", 10) or 0
        return [Device(id=str(n), type_label="R1") for n in range(count)]


class WidgetManager(AcceleratorManager):
    """A second resource with an extra node resource, found by listing /dev."""

    name = "widget"
    resource_name = "WPU"
    visible_devices_env_var = "WIDGET_VISIBLE"
    env_vars_read = ("WIDGET_VISIBLE", "WIDGET_POD")

    def detect(self, host: Host) -> list[Device]:
        names = [n for n in host.listdir("/dev") if n.startswith("widget")]
        return [Device(id=n.removeprefix("widget"), type_label="W-1") for n in names]

    def additional_resources(self, devices: Sequence[Device], host: Host) -> dict[str, float]:
        pod = host.env.get("WIDGET_POD")
        return {f"widget-pod-{pod}": 1.0} if pod else {}


ACME_CSV = (
    "0, GPU-11111111-2222-3333-4444-555555555555, Acme Z9, 16384\n"
    "1, GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee, Acme Z9, 16384\n"
)


def acme_sysfs(root: Path, count: int, *, model: str = "Acme Y7") -> None:
    """Write `count` Acme cards as sysfs shows them: class links to PCI device directories."""
    driver = root / "sys/bus/pci/drivers/acme"
    driver.mkdir(parents=True, exist_ok=True)
    (root / "sys/class/acme").mkdir(parents=True, exist_ok=True)
    for n in range(count):
        bus = f"0000:{n + 0x10:02x}:00.0"
        device = root / "sys/devices/pci0000:00" / bus
        device.mkdir(parents=True)
        (device / "model").write_text(model + "\n")
        (device / "uuid").write_text(f"ACME-{n:04d}-SERIAL\n")
        (device / "numa_node").write_text(f"{n % 2}\n")
        (device / "driver").symlink_to("../../../bus/pci/drivers/acme")
        card = root / f"sys/class/acme/card{n}"
        card.mkdir()
        (card / "device").symlink_to(f"/sys/devices/pci0000:00/{bus}")


def acme_host(
    root: Optional[Path] = None, env: Optional[dict[str, str]] = None, csv: Optional[str] = ACME_CSV
) -> FakeHost:
    commands = {"acme-smi": (0, csv)} if csv is not None else {}
    return FakeHost(root=root, env=env or {}, commands=commands)


def acme_csv(count: int, model: str = "Acme Z9") -> str:
    """`acme-smi --csv` output for `count` devices with distinct UUIDs."""
    return "".join(
        f"{n}, GPU-{n:08x}-0000-4000-8000-{n:012x}, {model}, 16384\n" for n in range(count)
    )


def static_manager(
    family: str, resource: str, devices: Sequence[Device] | Exception, **attributes: object
) -> AcceleratorManager:
    """A manager that detects the given devices (or raises the given exception)."""

    def detect(self: AcceleratorManager, host: Host) -> list[Device]:
        if isinstance(devices, Exception):
            raise devices
        return list(devices)

    namespace = {"name": family, "resource_name": resource, "detect": detect, **attributes}
    cls = type(f"{family.title()}Manager", (AcceleratorManager,), namespace)
    return cls()  # type: ignore[no-any-return]


MakeManagers = Callable[..., list[AcceleratorManager]]
"""The ``use_managers`` fixture: install managers as the registry's, in the order given."""


class Provides:
    """A plugin object that provides the given managers, in order."""

    def __init__(self, managers: list[AcceleratorManager]) -> None:
        self.managers = managers
        self.__name__ = "test-managers"

    @hookimpl
    def accelkit_register_managers(self) -> list[AcceleratorManager]:
        return self.managers


class ReadsRecorded(FakeHost):
    """A host that records the files read through it, in order: what a detection reads."""

    def __init__(self, root: Path) -> None:
        super().__init__(root=root)
        self.read: list[str] = []

    def read_text(self, path: str) -> Optional[str]:
        self.read.append(path)
        return super().read_text(path)
