"""Inside a worker: which devices did my scheduler let me see?"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Optional

from accelkit._faults import PLUGIN_FAULTS
from accelkit._visibility import checked_ids, is_index
from accelkit.errors import PluginWarning

if TYPE_CHECKING:
    from accelkit.manager import Frameworks
    from accelkit.registry import Registry
    from accelkit.schedule._grant import Grant

__all__ = ["FRAMEWORKS", "devices", "visible_ids"]


def visible_ids(
    env: Optional[Mapping[str, str]] = None, registry: Optional[Registry] = None
) -> dict[str, Optional[list[str]]]:
    """Visible device ids by family, as each family's runtime would read ``env``.

    ``env`` defaults to ``os.environ``. ``{"nvidia": ["0"], "tpu": None}``: ids are strings in
    the family's own id space (what the grant wrote); None means the variable is unset (every
    device visible), ``[]`` that nothing is (``""`` or ``NoDevFiles``). Reading tolerates
    whitespace around ids. A value a family cannot read (``NEURON_RT_VISIBLE_CORES=x``) counts
    as nothing visible, with a warning, as it does in :func:`~accelkit.detect_node`: one bad
    variable never hides the answer for the other families. The families are ``registry``'s
    (None: the default one).
    """
    from accelkit.registry import resolve

    source: Mapping[str, str] = os.environ if env is None else env
    visible: dict[str, Optional[list[str]]] = {}
    for manager in resolve(registry).managers():
        try:
            ids = checked_ids(manager.read_visible(source), f"{manager.name} read_visible()")
        except PLUGIN_FAULTS as error:  # a plugin's reader must not break every worker's call
            warnings.warn(
                f"{manager.name}: cannot read its visibility variables ({error}); treating it "
                "as nothing visible",
                PluginWarning,
                stacklevel=2,
            )
            ids = []
        visible[manager.name] = ids
    return visible


FRAMEWORKS = ("torch", "jax", "tensorflow")
"""Frameworks :func:`devices` names devices for."""

_XLA_PLATFORMS = {"cuda": "gpu"}
"""Framework device names whose JAX platform differs: JAX and TensorFlow call CUDA and ROCm
GPUs ``gpu``/``GPU`` where PyTorch says ``cuda``. PyTorch/XLA's ``xla`` is no platform at all:
a family using it declares ``Frameworks.platform``."""


def devices(
    framework: str = "torch",
    *,
    env: Optional[Mapping[str, str]] = None,
    grant: Optional[Grant] = None,
    registry: Optional[Registry] = None,
) -> list[str]:
    """The framework's names for the devices this worker was given: ``["cuda:0", "cuda:1"]``.

    Visibility variables renumber devices, so a worker's devices are positions 0 .. n-1 in the
    order the variable lists them, whatever their ids on the host (``CUDA_VISIBLE_DEVICES=4,5``
    gives ``cuda:0`` and ``cuda:1``); with ``ACCELKIT_LOCAL_DEVICES_<FAMILY>`` (peers' devices
    visible too, ``Grant.env(peers=...)``) only the worker's own positions. A family counts when
    its own variable is set (or the grant names it), not when it reads another family's (HIP
    falls back to ``CUDA_VISIBLE_DEVICES``). No accelerator: ``["cpu"]``.

    ``framework`` is one of :data:`FRAMEWORKS` (another is a ``ValueError`` naming them), and
    the names are each framework's own, from the family's declared ``Frameworks``:

    - ``"torch"``: ``"cuda:0"``, the declared ``device`` and the position, as ``torch.device``
      takes it; a family that uses its devices as one (Gaudi, ``indexed=False``) gives the bare
      name (``"hpu"``).
    - ``"jax"``: ``"gpu:0"``, ``"tpu:3"``: JAX's platform (``Device.platform``, the backend
      ``jax.devices()`` takes) and the position, so the device is
      ``jax.local_devices(backend=platform)[position]``. JAX has no device strings of its own
      (``str(device)`` differs between releases and backends), so this is the one form its
      API can be asked with.
    - ``"tensorflow"``: ``"/device:GPU:0"``, the ``name`` of TensorFlow's
      ``tf.config.list_logical_devices()`` entry, which ``tf.device()`` takes (not
      ``/physical_device:GPU:0``, which names a device to configure, not to place work on).

    The platform is the declared ``Frameworks.platform``, else the ``device`` (``"cuda"`` as
    ``"gpu"``, as JAX and TensorFlow name CUDA and ROCm GPUs); TensorFlow's device type is it
    upper-cased, as its pluggable devices are named (``XPU``, ``HPU``, ``NPU``). A family used
    as one device gives position 0 there, the process's one device. Positions count the
    family's devices: where a framework splits one further (a TPU v3 chip is two JAX devices,
    one per TensorCore), its own numbering applies.

    ``grant`` is the worker's grant, when it is known: a ``ValueError`` then says so when the
    environment does not show the granted ids (a worker started without its grant's
    environment sees the wrong devices, or all of them).
    """
    from accelkit.registry import resolve
    from accelkit.schedule._worker_env import LOCAL_DEVICES_PREFIX

    if framework not in FRAMEWORKS:
        raise ValueError(
            f"no device names for framework {framework!r}; known: {', '.join(FRAMEWORKS)}"
        )
    source: Mapping[str, str] = os.environ if env is None else env
    plugins = resolve(registry)
    assigned = {} if grant is None else grant.ids_by_family()
    names: list[str] = []
    counted: set[str] = set()  # primary variables whose devices are named already
    seen = visible_ids(source, registry=plugins)
    # the grant's families first: where two families claim one variable (MetaX and NVIDIA both
    # read CUDA_VISIBLE_DEVICES), its devices are the granted family's, and are named once
    for family, ids in sorted(seen.items(), key=lambda item: item[0] not in assigned):
        own = assigned.get(family)
        manager = plugins.get_manager(family)
        variable = manager.visible_devices_env_var
        if own is None and (variable not in source or variable in counted):
            continue  # read through another family's variable (HIP falls back to CUDA's)
        if ids is None:
            if own is not None:
                raise ValueError(
                    f"the grant gives {family} devices {own}, but this worker's environment "
                    "does not restrict the family, so it would use every device: start the "
                    "worker with grant.env()"
                )
            continue
        if own is not None and not set(own) <= set(ids):
            raise ValueError(
                f"the grant gives {family} devices {own}, but this worker's environment shows "
                f"{ids}: start the worker with grant.env()"
            )
        if variable is not None:
            counted.add(variable)
        frameworks = manager.frameworks
        device = frameworks.device
        if not ids or device is None:
            continue
        positions = _local_positions(source.get(LOCAL_DEVICES_PREFIX + family.upper()), ids)
        if own is not None:
            positions = [ids.index(i) for i in own]
        names += _names(framework, family, device, frameworks, positions)
    return names or ["cpu"]


def _names(
    framework: str, family: str, device: str, frameworks: Frameworks, positions: list[int]
) -> list[str]:
    """``framework``'s names for the family's devices at ``positions``, ``device`` being its
    declared framework device (see :func:`devices`)."""
    if framework == "torch":
        return [f"{device}:{p}" for p in positions] if frameworks.indexed else [device]
    platform = frameworks.platform or _XLA_PLATFORMS.get(device, device)
    if platform == "xla":
        raise ValueError(
            f"{family} declares the framework device 'xla' (PyTorch/XLA's) but no platform: "
            f"{framework} names XLA devices by their hardware ('tpu', 'neuron'); the plugin "
            "should declare Frameworks(platform=...)"
        )
    if not frameworks.indexed:
        positions = [0]  # the process's one device
    if framework == "jax":
        return [f"{platform}:{p}" for p in positions]
    return [f"/device:{platform.upper()}:{p}" for p in positions]


def _local_positions(value: Optional[str], ids: list[str]) -> list[int]:
    """The worker's own positions among the visible ``ids`` (all of them when unset)."""
    if value is None:
        return list(range(len(ids)))
    tokens = [t.strip() for t in value.split(",") if t.strip()]
    if not all(is_index(t) and int(t) < len(ids) for t in tokens):
        raise ValueError(
            f"ACCELKIT_LOCAL_DEVICES_*={value!r} does not name positions among the {len(ids)} "
            "visible devices"
        )
    return [int(t) for t in tokens]
