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


FRAMEWORKS = ("torch",)
"""Frameworks :func:`devices` names devices for."""


def devices(
    framework: str = "torch",
    *,
    env: Optional[Mapping[str, str]] = None,
    grant: Optional[Grant] = None,
    registry: Optional[Registry] = None,
) -> list[str]:
    """The framework's names for the devices this worker was given: ``["cuda:0", "cuda:1"]``.

    Visibility variables renumber devices, so a worker's devices are ``<name>:0`` .. ``n-1`` in
    the order the variable lists them, whatever their ids on the host (``CUDA_VISIBLE_DEVICES=
    4,5`` gives ``cuda:0`` and ``cuda:1``); with ``ACCELKIT_LOCAL_DEVICES_<FAMILY>`` (peers'
    devices visible too, ``Grant.env(peers=...)``) only the worker's own positions. The name is
    the family's declared ``framework_device``; a family that uses its devices as one (Gaudi)
    gives its bare name (``"hpu"``). A family counts when its own variable is set (or the grant
    names it), not when it reads another family's (HIP falls back to ``CUDA_VISIBLE_DEVICES``).
    No accelerator: ``["cpu"]``.

    ``grant`` is the worker's grant, when it is known: a ``ValueError`` then says so when the
    environment does not show the granted ids (a worker started without its grant's
    environment sees the wrong devices, or all of them).
    """
    from accelkit.registry import resolve
    from accelkit.schedule._worker_env import LOCAL_DEVICES_PREFIX

    if framework not in FRAMEWORKS:
        raise ValueError(f"no device names for framework {framework!r}; known: {FRAMEWORKS}")
    source: Mapping[str, str] = os.environ if env is None else env
    plugins = resolve(registry)
    assigned = {} if grant is None else grant.ids_by_family()
    names: list[str] = []
    for family, ids in visible_ids(source, registry=plugins).items():
        own = assigned.get(family)
        manager = plugins.get_manager(family)
        if own is None and manager.visible_devices_env_var not in source:
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
        frameworks = manager.frameworks
        if not ids or frameworks.device is None:
            continue
        positions = _local_positions(source.get(LOCAL_DEVICES_PREFIX + family.upper()), ids)
        if own is not None:
            positions = [ids.index(i) for i in own]
        if not frameworks.indexed:
            names.append(frameworks.device)
            continue
        names += [f"{frameworks.device}:{p}" for p in positions]
    return names or ["cpu"]


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
