"""Gaudi (stub: data sheet and detection to come)."""

from __future__ import annotations

from accelkit import AcceleratorManager, Device, Host, hookimpl


class GaudiManager(AcceleratorManager):
    name = "gaudi"
    resource_name = "HPU"
    visible_devices_env_var = "HABANA_VISIBLE_MODULES"

    def detect(self, host: Host) -> list[Device]:
        return []


@hookimpl
def accelkit_register_managers() -> list[AcceleratorManager]:
    return [GaudiManager()]
