"""A Kubernetes Node Feature Discovery feature file for this node.

NFD's local feature source reads ``key=value`` lines from files under
``/etc/kubernetes/node-feature-discovery/features.d/`` and turns them into node labels. Keys
are put in the ``accelkit.feature.node.kubernetes.io/`` namespace, which NFD accepts without
configuration (any ``*.feature.node.kubernetes.io`` namespace is), and values in label syntax.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelkit.exports._labels import relabel

if TYPE_CHECKING:
    from accelkit.node._record import Node

__all__ = ["NFD_NAMESPACE", "to_nfd"]

NFD_NAMESPACE = "accelkit.feature.node.kubernetes.io/"


def to_nfd(node: Node) -> str:
    """``accelkit.feature.node.kubernetes.io/nvidia.count=8`` lines, one per node label."""
    lines = ["# accelkit node features, for NFD's local feature source (features.d)"]
    lines += [f"{key}={value}" for key, value in relabel(node.labels, NFD_NAMESPACE).items()]
    return "\n".join(lines) + "\n"
