"""Ascend (stub: data sheet and detection to come)."""

from __future__ import annotations

from accelkit import AcceleratorManager, Device, Host, hookimpl


class AscendManager(AcceleratorManager):
    name = "ascend"
    resource_name = "NPU"
    visible_devices_env_var = "ASCEND_RT_VISIBLE_DEVICES"

    def detect(self, host: Host) -> list[Device]:
        return []


@hookimpl
def accelkit_register_managers() -> list[AcceleratorManager]:
    return [AscendManager()]
