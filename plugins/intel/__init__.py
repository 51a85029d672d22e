"""Intel (stub: data sheet and detection to come)."""

from __future__ import annotations

from accelkit import AcceleratorManager, Device, Host, hookimpl


class IntelManager(AcceleratorManager):
    name = "intel"
    resource_name = "GPU"
    visible_devices_env_var = "ONEAPI_DEVICE_SELECTOR"

    def detect(self, host: Host) -> list[Device]:
        return []


@hookimpl
def accelkit_register_managers() -> list[AcceleratorManager]:
    return [IntelManager()]
