"""``ray start`` arguments that make a Ray node offer what accelkit found on this machine."""

from __future__ import annotations

import json
import warnings
from typing import TYPE_CHECKING, Union

from accelkit.exports._labels import relabel

if TYPE_CHECKING:
    from accelkit.node._record import Node

__all__ = ["RAY_ACCELERATOR_RESOURCES", "RAY_LABEL_PREFIX", "to_ray"]

RAY_LABEL_PREFIX = "accelkit/"
"""Node labels go to Ray under this prefix (``ray.io/`` is Ray's own)."""

RAY_ACCELERATOR_RESOURCES = (
    "GPU",
    "TPU",
    "neuron_cores",
    "HPU",
    "NPU",
    "RBLN",
    "FURIOSA",
    "MBLT",
    "TTNPU",
)
"""The resources Ray's own accelerator managers detect, as of Ray 2.60
(``ray._private.accelerators.get_all_accelerator_resource_names()``, which the core cannot import
without Ray; tests/engines compares the two where Ray is installed). A raylet given no number of
one of them counts what its manager finds (``ResourceAndLabelSpec._get_current_node_accelerator``
reads a missing ``--num-gpus``, or a name missing from ``--resources``, as "detect"), so
``to_ray`` gives each a number: 0 where the node has none."""

_RAY_OWN = ("CPU", "memory", "object_store_memory")
"""Ray's default resources, which it refuses in ``--resources`` (GPU goes to ``--num-gpus``)."""

_RAY_NODE_PREFIX = "node:"
"""Ray's own resources of a node: ``node:<ip>`` on each, ``node:__internal_head__`` on the head
(which ``ray start`` refuses in ``--resources``; one for another address would misplace tasks)."""

_RAY_MOST = 100e12
"""The largest quantity of a resource ``ray start`` takes (``MAX_RESOURCE_QUANTITY``)."""


def to_ray(node: Node) -> list[str]:
    """``["--num-gpus=8", '--resources={"accelerator_type:H100":1,"TPU":0,...}', "--labels=..."]``.

    GPUs of any family are ``--num-gpus`` (Ray refuses ``GPU`` inside ``--resources``); every
    other resource, accelerator types and TPU slice names included, is in the ``--resources``
    JSON; node labels are ``--labels`` in Kubernetes label syntax. An accelerator resource the
    node has none of is written as 0 (``--num-gpus=0``, ``"TPU":0``), which Ray drops from the
    node, so that the raylet does not detect devices the node left out (see
    :data:`RAY_ACCELERATOR_RESOURCES`). No argument holds whitespace, so
    ``ray start $(accelkit resources --format ray)`` passes each one whole.
    """
    resources = dict(node.resources)
    for name in _accelerator_resources(node):
        resources.setdefault(name, 0.0)
    refused = [name for name in resources if name in _RAY_OWN or name.startswith(_RAY_NODE_PREFIX)]
    if refused:
        raise ValueError(f"Ray reserves the resource name(s) {refused}; rename them on this node")
    gpus = resources.pop("GPU")
    if not float(gpus).is_integer():
        raise ValueError(f"ray start --num-gpus takes a whole number; this node has GPU={gpus}")
    args = [f"--num-gpus={int(gpus)}"]
    _warn_where_ray_numbers_other_devices(node)
    spaced = [name for name in resources if any(ch.isspace() for ch in name)]
    if spaced:
        raise ValueError(f"resource names with whitespace cannot be ray start arguments: {spaced}")
    partial = {name: value for name, value in resources.items() if not float(value).is_integer()}
    if partial:
        raise ValueError(
            f"ray start takes whole quantities of a node's resources; this node has {partial}"
        )
    huge = {name: value for name, value in resources.items() if value > _RAY_MOST}
    if huge:
        raise ValueError(
            f"ray start takes at most {_RAY_MOST:g} of a resource; this node has {huge}"
        )
    values = {name: number(value) for name, value in resources.items()}
    args.append("--resources=" + json.dumps(values, separators=(",", ":")))
    labels = relabel(node.labels, RAY_LABEL_PREFIX)
    if labels:
        args.append("--labels=" + ",".join(f"{key}={value}" for key, value in labels.items()))
    return args


def _accelerator_resources(node: Node) -> list[str]:
    """The accelerator resources a raylet might detect on its own: Ray's
    (:data:`RAY_ACCELERATOR_RESOURCES`) and those of every family registered where the node was
    detected (``node.policies``, a family without devices included), which a later Ray may learn
    to detect as it learned ``RBLN`` and ``TTNPU``; sorted, so the text does not depend on the
    order plugins loaded in."""
    return sorted({*RAY_ACCELERATOR_RESOURCES, *(p.resource_name for p in node.policies.values())})


def _warn_where_ray_numbers_other_devices(node: Node) -> None:
    """Ray hands out the N devices of a resource it assigns ids for (``--num-gpus=N``,
    ``"neuron_cores":N``, ``"HPU":N``, ...) as the first N ids its environment shows: the tokens
    of its manager's variable where the raylet inherits it set, else 0 to N-1 (``worker.py``,
    ``get_accelerator_ids_for_accelerator_resource``), written into that variable as they are.
    Where a family's devices are not the first N (an operator's exclusion, a Prohibited GPU, MIG
    instances), Ray's ids name devices the node left out; the raylet started with the family's
    variable listing the node's ids hands out those instead. The list is comma separated, as
    Ray splits every such variable on ``,`` (and reads no ranges: ``NEURON_RT_VISIBLE_CORES=0-4``
    would be one id). A node a shell's own variable narrowed (ids 0 to N-1 of it) needs nothing:
    a raylet started from that shell inherits it. (A resource of two families on one node is a
    limit of its own, which the Ray bridge warns about.)"""
    for resource in RAY_ACCELERATOR_RESOURCES:
        devices = sorted(
            (d for d in node.devices if d.resource_name == resource),
            key=lambda d: (d.index is None, d.index or 0),
        )
        families = list(dict.fromkeys(d.family for d in devices))
        if len(families) != 1 or [d.index for d in devices] == list(range(len(devices))):
            continue
        ids = ",".join(d.id for d in devices)
        policy = node.policies.get(families[0])
        variable = policy.visible_devices_env_var if policy is not None else None
        example = f" ({variable}={ids} ray start ...)" if variable else ""
        warnings.warn(
            f"Ray numbers this node's {len(devices)} {resource} 0 to {len(devices) - 1}, but "
            f"they are {families[0]} devices {ids}: start the raylet with the family's "
            f"visibility variable listing them{example}, or Ray hands out {resource} devices "
            "this node leaves out",
            UserWarning,
            stacklevel=3,
        )


def number(value: float) -> Union[int, float]:
    """8.0 -> 8, 0.5 stays: whole amounts as integers, as every engine's examples write them
    (``to_dask`` writes its pairs with it too)."""
    return int(value) if float(value).is_integer() else float(value)
