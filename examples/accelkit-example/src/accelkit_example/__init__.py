"""ACME accelerators for accelkit: a complete third-party plugin.

The fictional ACME card shows up as ``/dev/acme<N>`` with its model in
``/sys/class/acme/acme<N>/model``; a process sees the cards listed in ``ACME_VISIBLE_DEVICES``."""

from __future__ import annotations

from accelkit import AcceleratorManager, Device, Host, hookimpl, note
from accelkit.detect import numbered_files, read_value

DEVICE_PREFIX = "/dev/acme"


class AcmeManager(AcceleratorManager):
    """ACME cards: one ``ACME`` resource per ``/dev/acme<N>``, granted whole."""

    name = "acme"
    resource_name = "ACME"
    visible_devices_env_var = "ACME_VISIBLE_DEVICES"
    fractional = False
    api_version = 2

    def detect(self, host: Host) -> list[Device]:
        """One device per ``/dev/acme<N>``, seen only through ``host`` (real, fake or snapshot)."""
        devices = []
        for number, _path in numbered_files(host, DEVICE_PREFIX):  # (N, path), N in order
            model = read_value(host, f"/sys/class/acme/acme{number}/model")
            label = model.replace(" ", "-") if model else None
            devices.append(
                Device(str(number), number, model=model, type_label=label, source="devfs")
            )
        note(f"{len(devices)} ACME card(s) under /dev")
        return devices


@hookimpl
def accelkit_register_managers() -> list[AcceleratorManager]:
    return [AcmeManager()]
