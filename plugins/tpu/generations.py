"""TPU generations and the pod slices each can form: the one table of their shapes.

Cloud TPU's documented shapes: v5e and v6e have 2-D topologies with 1 chip per TensorCore, so the
pod-type suffix counts chips ("4x4" v6e is "v6e-16", 4 hosts of 4 chips; the single-host "1x1",
"2x2" and "2x4" hold 1, 4 and 8 chips); v2 and v3 have 2-D topologies and v4, v5p and v7x 3-D
ones, with 2 TensorCores a chip, so their suffix counts TensorCores ("2x2x2" v4 is "v4-16": 8
chips on 2 hosts of 4). The plugin reads the table to label a pod host; training plans reach it
through ``TpuManager.slice_shape``, since the core never imports a plugin.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import NamedTuple, Optional

__all__ = [
    "TPU_GENERATIONS",
    "TpuGeneration",
    "TpuSlice",
    "chip_type_label",
    "generation_named",
    "tpu_slice",
]


class TpuGeneration(NamedTuple):
    """A TPU generation's shapes: topology dimensions, TensorCores a chip, chips a host."""

    name: str
    """As Cloud TPU accelerator types spell it: "v4", "v5litepod", "v6e", "v7x"."""
    dimensions: int
    cores_per_chip: int
    single_host: Mapping[str, int]
    """Topologies that fit on one host -> chips on it; every other topology has 4 a host."""
    topologies: Optional[frozenset[str]] = None
    """The documented topologies, where the generation has a fixed list (v5e, v6e)."""
    functions_per_chip: int = 1
    """PCI functions one chip exposes: two on TPU7x (Ironwood), one per chiplet, each with its
    own VFIO group, as functions 0 and 1 of one PCI device (tpu-info's ``TpuChip`` counts two
    devices a chip for 7x and groups functions by domain:bus:device into one chip)."""

    @property
    def chips_per_host(self) -> int:
        """The most chips one host of this generation has (8 on single-host v5e/v6e, else 4)."""
        return max(CHIPS_PER_HOST, *self.single_host.values())


TWO_D_TOPOLOGIES = frozenset({"1x1", "2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16"})
TPU_GENERATIONS: dict[str, TpuGeneration] = {
    "v2": TpuGeneration("v2", 2, 2, {"2x2": 4}),
    "v3": TpuGeneration("v3", 2, 2, {"2x2": 4}),
    "v4": TpuGeneration("v4", 3, 2, {"2x2x1": 4}),
    "v5p": TpuGeneration("v5p", 3, 2, {"2x2x1": 4}),
    "v5litepod": TpuGeneration("v5litepod", 2, 1, {"1x1": 1, "2x2": 4, "2x4": 8}, TWO_D_TOPOLOGIES),
    "v6e": TpuGeneration("v6e", 2, 1, {"1x1": 1, "2x2": 4, "2x4": 8}, TWO_D_TOPOLOGIES),
    "v7x": TpuGeneration("v7x", 3, 2, {"2x2x1": 4}, functions_per_chip=2),
}
"""Every generation, by Cloud TPU's name."""

ALIASES = {"v5e": "v5litepod", "tpu7x": "v7x", "ironwood": "v7x", "trillium": "v6e"}
CHIPS_PER_HOST = 4


class TpuSlice(NamedTuple):
    """One TPU slice: how many chips and hosts, and its pod type."""

    generation: str
    topology: str
    chips: int
    chips_per_host: int
    hosts: int
    pod_type: str
    """Cloud TPU's accelerator type: "v6e-16", "v4-16"."""

    @property
    def head_resource(self) -> str:
        """The resource only the slice's first host offers (``TPU-v6e-16-head``), as this plugin
        and Ray name it: one task there starts the others."""
        return f"TPU-{self.pod_type}-head"

    @property
    def type_label(self) -> str:
        """The type label its hosts give their chips ("TPU-V6E"), which a training plan asks
        for as ``accelerator_type:TPU-V6E`` however the user spelled the type."""
        return chip_type_label(self.generation)


def chip_type_label(generation: str) -> str:
    """The type label of a generation's chips ("v6e" -> "TPU-V6E"), as Ray's TPU manager names
    a node's accelerator type: one spelling for detection and for training plans."""
    return f"TPU-{generation.upper()}"


def generation_named(name: str) -> Optional[TpuGeneration]:
    """The generation ``name`` spells ("v6e", "v5e", "tpu7x", "trillium"), None if unknown."""
    return TPU_GENERATIONS.get(ALIASES.get(name, name))


def tpu_slice(accelerator_type: str, topology: str) -> TpuSlice:
    """The slice of ``accelerator_type`` ("v6e", "TPU-V6E", "v6e-16", "v5e") shaped ``topology``.

    ``ValueError`` naming the value for an unknown generation, a topology the generation does
    not have (wrong dimensions, not one of v5e's and v6e's documented shapes, chips that do not
    fill whole hosts), or a pod type whose size disagrees with the topology.
    """
    known, size = _read_accelerator_type(accelerator_type)
    dims = _dimensions(topology, known)
    chips = math.prod(dims)
    shape = "x".join(str(d) for d in dims)
    if known.topologies is not None and shape not in known.topologies:
        raise ValueError(
            f"{known.name} has no topology {topology!r}; its topologies are "
            f"{', '.join(sorted(known.topologies, key=_chip_count))}"
        )
    per_host = known.single_host.get(shape, CHIPS_PER_HOST)
    if shape not in known.single_host and chips % per_host:
        raise ValueError(
            f"{known.name} topology {topology!r} has {chips} chips, which do not fill hosts "
            f"of {per_host}; use a topology whose chip count is a multiple of {per_host}"
        )
    per_host = min(per_host, chips)
    pod_type = f"{known.name}-{chips * known.cores_per_chip}"
    if size is not None and size != chips * known.cores_per_chip:
        raise ValueError(
            f"accelerator type {accelerator_type!r} is a {size}-core slice, but topology "
            f"{topology!r} makes {pod_type}"
        )
    return TpuSlice(known.name, shape, chips, per_host, chips // per_host, pod_type)


def _read_accelerator_type(accelerator_type: str) -> tuple[TpuGeneration, Optional[int]]:
    """The generation an accelerator type names, and its pod-type size if it gives one."""
    if not isinstance(accelerator_type, str):
        raise ValueError(f"a TPU accelerator type is a name like 'v6e', got {accelerator_type!r}")
    text = accelerator_type.strip().lower().removeprefix("tpu-")
    name, _, size = text.partition("-")
    known = generation_named(name)
    if known is None:
        raise ValueError(
            f"unknown TPU generation in {accelerator_type!r}; known: "
            f"{', '.join(TPU_GENERATIONS)} (or v5e, TPU-V6E, v6e-16)"
        )
    if size and not (size.isascii() and size.isdecimal() and int(size) > 0):
        raise ValueError(f"{accelerator_type!r}: the pod-type size {size!r} is not a number")
    if size:
        return known, int(size)
    return known, None


def _dimensions(topology: str, known: TpuGeneration) -> list[int]:
    """``"4x4"`` -> ``[4, 4]``, with as many dimensions as the generation has."""
    parts = topology.strip().lower().split("x") if isinstance(topology, str) else []
    if len(parts) != known.dimensions or not all(
        p.isascii() and p.isdecimal() and int(p) > 0 for p in parts
    ):
        example = "4x4" if known.dimensions == 2 else "2x2x2"
        raise ValueError(
            f"TPU {known.name} topology {topology!r} is not {known.dimensions} "
            f"positive whole numbers joined by 'x', like {example!r}"
        )
    return [int(p) for p in parts]


def _chip_count(shape: str) -> int:
    """Chips in a topology such as "4x4", for listing topologies smallest first."""
    return math.prod(int(p) for p in shape.split("x"))
