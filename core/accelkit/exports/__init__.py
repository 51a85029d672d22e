"""What a node offers, in the formats of the engines that schedule it: Ray, Dask, SLURM and
Kubernetes. Each exporter reads only a :class:`~accelkit.Node` (detected here, or rebuilt from
``accelkit ls --json``), so no plugin is needed to export; ``accelkit resources --format F``
prints the same text."""

from __future__ import annotations

from accelkit.exports._dask import to_dask
from accelkit.exports._gres import to_gres
from accelkit.exports._nfd import to_nfd
from accelkit.exports._ray import to_ray

__all__ = ["to_dask", "to_gres", "to_nfd", "to_ray"]
