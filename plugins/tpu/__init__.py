"""Tpu (stub: data sheet and detection to come)."""

from __future__ import annotations

from accelkit import AcceleratorManager, Device, Host, hookimpl


class TpuManager(AcceleratorManager):
    name = "tpu"
    resource_name = "TPU"
    visible_devices_env_var = "TPU_VISIBLE_CHIPS"

    def detect(self, host: Host) -> list[Device]:
        return []


@hookimpl
def accelkit_register_managers() -> list[AcceleratorManager]:
    return [TpuManager()]
