"""Built-in plugin ``hints``: advisory framework memory limits for workers sharing a device.

A fractional grant (``{"GPU": 0.5}``) only divides *scheduling*: nothing stops the worker's
framework from taking the whole device's memory, and JAX and TensorFlow do so by default. This
plugin adds the variables those frameworks read, so a worker holding 0.5 of a device asks for
about half of its memory:

- ``XLA_PYTHON_CLIENT_MEM_FRACTION`` = the share (JAX preallocates that fraction of memory);
- ``TF_FORCE_GPU_ALLOW_GROWTH=true`` (TensorFlow allocates as it goes instead of all at once).

They are hints, not limits: nothing enforces them, other frameworks ignore them (PyTorch has no
such variable; call ``torch.cuda.set_per_process_memory_fraction``), and a variable the worker
already inherits is kept (``Grant.env``). Only shares of families whose frameworks read the
variables count (``Frameworks.memory_hints``: CUDA and ROCm GPUs; a third-party MLU gets none),
and whole-device grants get none. Block the plugin with ``ACCELKIT_DISABLE_PLUGINS=hints`` or
pass ``hooks=False`` to ``Grant.env``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Optional

from accelkit import hookimpl

if TYPE_CHECKING:
    from accelkit import AcceleratorManager, Grant

__all__ = ["accelkit_worker_env"]


@hookimpl
def accelkit_worker_env(
    grant: Grant, env: Mapping[str, Optional[str]], managers: Mapping[str, AcceleratorManager]
) -> Optional[dict[str, Optional[str]]]:
    """Memory hints sized to the smallest fractional share of a family whose frameworks read
    them; None for whole devices and for families that declare no use for them."""
    shares = [
        share
        for device, share in grant.devices
        if share < 1.0 and _reads_hints(managers.get(device.family))
    ]
    if not shares:
        return None
    return {
        "XLA_PYTHON_CLIENT_MEM_FRACTION": f"{min(shares):g}",
        "TF_FORCE_GPU_ALLOW_GROWTH": "true",
    }


def _reads_hints(manager: Optional[AcceleratorManager]) -> bool:
    """Whether the family's frameworks read memory hints (``Frameworks.memory_hints``)."""
    return manager is not None and manager.frameworks.memory_hints
