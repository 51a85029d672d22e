"""Amd (stub: data sheet and detection to come)."""

from __future__ import annotations

from accelkit import AcceleratorManager, Device, Host, hookimpl


class AmdManager(AcceleratorManager):
    name = "amd"
    resource_name = "GPU"
    visible_devices_env_var = "ROCR_VISIBLE_DEVICES"

    def detect(self, host: Host) -> list[Device]:
        return []


@hookimpl
def accelkit_register_managers() -> list[AcceleratorManager]:
    return [AmdManager()]
