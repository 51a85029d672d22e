"""NVIDIA GPUs (data sheet; detection to come)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from accelkit import AcceleratorManager, Device, Host, hookimpl


class NvidiaManager(AcceleratorManager):
    name = "nvidia"
    resource_name = "GPU"
    visible_devices_env_var = "CUDA_VISIBLE_DEVICES"
    env_vars_read = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES")
    framework_device = "cuda"
    collective_backend = "nccl"

    def visibility_env(self, ids: Sequence[str]) -> dict[str, Optional[str]]:
        return {**super().visibility_env(ids), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}

    def detect(self, host: Host) -> list[Device]:
        return []


@hookimpl
def accelkit_register_managers() -> list[AcceleratorManager]:
    return [NvidiaManager()]
