"""Neuron (stub: data sheet and detection to come)."""

from __future__ import annotations

from accelkit import AcceleratorManager, Device, Host, hookimpl


class NeuronManager(AcceleratorManager):
    name = "neuron"
    resource_name = "neuron_cores"
    visible_devices_env_var = "NEURON_RT_VISIBLE_CORES"

    def detect(self, host: Host) -> list[Device]:
        return []


@hookimpl
def accelkit_register_managers() -> list[AcceleratorManager]:
    return [NeuronManager()]
