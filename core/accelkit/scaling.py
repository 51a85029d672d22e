"""Training plans: N workers, each with accelerators of any family, as bundles a scheduler places.

Ray Train's ``ScalingConfig`` knows GPUs and TPUs; :class:`ScalingConfig` here knows every
family a plugin provides (``accelerator="neuron"``, ``"gaudi"``, ``"acme"``) and takes each
family's rules from its manager: the quantity rule per worker, the collective backend, the
framework device. It also refuses what Ray quietly changes: ``use_gpu`` with 0 GPUs per worker
(Ray makes it 1), GPUs and TPUs in one plan, a TPU plan whose workers cannot fill its slice.

TPU slices (:func:`tpu_slice`) follow Cloud TPU's documented shapes: v5e and v6e have 2-D
topologies with 1 chip per TensorCore, so the pod-type suffix counts chips ("4x4" v6e is
"v6e-16", 4 hosts of 4 chips; the single-host "1x1", "2x2" and "2x4" hold 1, 4 and 8 chips);
v2 and v3 have 2-D topologies and v4, v5p and v7x 3-D ones, with 2 TensorCores a chip, so their
suffix counts TensorCores ("2x2x2" v4 is "v4-16": 8 chips on 2 hosts of 4).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional, Union

from accelkit.errors import InvalidRequest
from accelkit.manager import ACCELERATOR_TYPE_PREFIX, AcceleratorManager
from accelkit.quantities import UNIT, from_units, to_units
from accelkit.registry import Registry, resolve
from accelkit.schedule._request import family_units

__all__ = ["GLOO", "TPU_GENERATIONS", "ScalingConfig", "TpuGeneration", "TpuSlice", "tpu_slice"]

GLOO = "gloo"
"""The collective backend of a plan without accelerators (CPU workers)."""

CPU = "CPU"
GPU = "GPU"
TPU = "TPU"
TYPE_REQUEST = 0.001
"""What a worker asks of ``accelerator_type:<label>``: a token amount, as Ray does."""


@dataclass(frozen=True)
class TpuGeneration:
    """A TPU generation's shapes: topology dimensions, TensorCores a chip, chips a host."""

    name: str
    """As Cloud TPU accelerator types spell it: "v4", "v5litepod", "v6e", "v7x"."""
    dimensions: int
    cores_per_chip: int
    single_host: Mapping[str, int]
    """Topologies that fit on one host -> chips on it; every other topology has 4 a host."""
    topologies: Optional[frozenset[str]] = None
    """The documented topologies, where the generation has a fixed list (v5e, v6e)."""


_TWO_D = frozenset({"1x1", "2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16"})
TPU_GENERATIONS: dict[str, TpuGeneration] = {
    "v2": TpuGeneration("v2", 2, 2, {"2x2": 4}),
    "v3": TpuGeneration("v3", 2, 2, {"2x2": 4}),
    "v4": TpuGeneration("v4", 3, 2, {"2x2x1": 4}),
    "v5p": TpuGeneration("v5p", 3, 2, {"2x2x1": 4}),
    "v5litepod": TpuGeneration("v5litepod", 2, 1, {"1x1": 1, "2x2": 4, "2x4": 8}, _TWO_D),
    "v6e": TpuGeneration("v6e", 2, 1, {"1x1": 1, "2x2": 4, "2x4": 8}, _TWO_D),
    "v7x": TpuGeneration("v7x", 3, 2, {"2x2x1": 4}),
}
"""Every generation :func:`tpu_slice` knows, by Cloud TPU's name."""

_ALIASES = {"v5e": "v5litepod", "tpu7x": "v7x", "ironwood": "v7x", "trillium": "v6e"}
_CHIPS_PER_HOST = 4


@dataclass(frozen=True)
class TpuSlice:
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
        """The resource only the slice's first host offers (``TPU-v6e-16-head``), as the TPU
        plugin and Ray name it: one task there starts the others."""
        return f"TPU-{self.pod_type}-head"


def tpu_slice(accelerator_type: str, topology: str) -> TpuSlice:
    """The slice of ``accelerator_type`` ("v6e", "TPU-V6E", "v6e-16", "v5e") shaped ``topology``.

    ``ValueError`` naming the value for an unknown generation, a topology the generation does
    not have (wrong dimensions, not one of v5e's and v6e's documented shapes, chips that do not
    fill whole hosts), or a pod type whose size disagrees with the topology.
    """
    generation, size = _generation(accelerator_type)
    dims = _dimensions(topology, generation)
    chips = math.prod(dims)
    shape = "x".join(str(d) for d in dims)
    if generation.topologies is not None and shape not in generation.topologies:
        raise ValueError(
            f"{generation.name} has no topology {topology!r}; its topologies are "
            f"{', '.join(sorted(generation.topologies, key=_chip_count))}"
        )
    per_host = generation.single_host.get(shape, _CHIPS_PER_HOST)
    if shape not in generation.single_host and chips % per_host:
        raise ValueError(
            f"{generation.name} topology {topology!r} has {chips} chips, which do not fill hosts "
            f"of {per_host}; use a topology whose chip count is a multiple of {per_host}"
        )
    per_host = min(per_host, chips)
    pod_type = f"{generation.name}-{chips * generation.cores_per_chip}"
    if size is not None and size != chips * generation.cores_per_chip:
        raise ValueError(
            f"accelerator type {accelerator_type!r} is a {size}-core slice, but topology "
            f"{topology!r} makes {pod_type}"
        )
    return TpuSlice(generation.name, shape, chips, per_host, chips // per_host, pod_type)


def _generation(accelerator_type: str) -> tuple[TpuGeneration, Optional[int]]:
    """The generation an accelerator type names, and its pod-type size if it gives one."""
    if not isinstance(accelerator_type, str):
        raise ValueError(f"a TPU accelerator type is a name like 'v6e', got {accelerator_type!r}")
    text = accelerator_type.strip().lower().removeprefix("tpu-")
    name, _, size = text.partition("-")
    name = _ALIASES.get(name, name)
    generation = TPU_GENERATIONS.get(name)
    if generation is None:
        raise ValueError(
            f"unknown TPU generation in {accelerator_type!r}; known: "
            f"{', '.join(TPU_GENERATIONS)} (or v5e, TPU-V6E, v6e-16)"
        )
    if size and not (size.isascii() and size.isdecimal() and int(size) > 0):
        raise ValueError(f"{accelerator_type!r}: the pod-type size {size!r} is not a number")
    return generation, int(size) if size else None


def _dimensions(topology: str, generation: TpuGeneration) -> list[int]:
    """``"4x4"`` -> ``[4, 4]``, with as many dimensions as the generation has."""
    parts = topology.strip().lower().split("x") if isinstance(topology, str) else []
    if len(parts) != generation.dimensions or not all(
        p.isascii() and p.isdecimal() and int(p) > 0 for p in parts
    ):
        example = "4x4" if generation.dimensions == 2 else "2x2x2"
        raise ValueError(
            f"TPU {generation.name} topology {topology!r} is not {generation.dimensions} "
            f"positive whole numbers joined by 'x', like {example!r}"
        )
    return [int(p) for p in parts]


def _chip_count(shape: str) -> int:
    return math.prod(int(p) for p in shape.split("x"))


Quantity = Union[int, float]


class ScalingConfig:
    """``num_workers`` workers, each with the same resources: what a training job asks for.

    ``accelerator`` names a family ("nvidia", "neuron", "acme") or a resource ("GPU",
    "neuron_cores"); ``use_gpu`` and ``use_tpu`` are the seed's spellings of ``"GPU"`` and
    ``"TPU"``. Each worker takes 1 of it unless ``resources_per_worker`` says otherwise
    (``{"GPU": 0.5, "CPU": 4}``), and 1 CPU unless it names CPUs. ``accelerator_type``
    ("A100") lands every worker on that type. TPU plans take their slice from
    ``accelerator_type`` and ``topology`` (:func:`tpu_slice`): each worker gets a host's chips
    unless it asks for fewer, and the workers must fill whole slices. ``backend`` overrides the
    family's declared collective backend. Every refusal is a ``ValueError`` naming the value.
    ``registry`` supplies the families (None: the default one).
    """

    def __init__(
        self,
        num_workers: int,
        use_gpu: bool = False,
        use_tpu: bool = False,
        accelerator: Optional[str] = None,
        resources_per_worker: Optional[Mapping[str, Quantity]] = None,
        accelerator_type: Optional[str] = None,
        topology: Optional[str] = None,
        backend: Optional[str] = None,
        *,
        registry: Optional[Registry] = None,
    ) -> None:
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
            raise ValueError(
                f"num_workers must be a whole number of at least 1, not {num_workers!r}"
            )
        self.num_workers = num_workers
        self.accelerator_type = accelerator_type
        self.topology = topology
        self._registry = resolve(registry)
        wanted = dict(resources_per_worker or {})
        self.resource = self._accelerator(use_gpu, use_tpu, accelerator, wanted)
        self.tpu: Optional[TpuSlice] = None
        self.slices = 0
        per_worker = self._per_worker(wanted)
        self.per_worker_resources: dict[str, float] = per_worker
        self.managers = self._owners(self.resource, accelerator)
        self._check_quantity(per_worker)
        self.backend = backend or self._backend()

    # -- what each worker asks for -----------------------------------------------------------
    def _accelerator(
        self,
        use_gpu: bool,
        use_tpu: bool,
        accelerator: Optional[str],
        wanted: Mapping[str, Quantity],
    ) -> Optional[str]:
        """The accelerator resource of the plan (None: CPU workers), from the three spellings."""
        named = [r for r in (GPU if use_gpu else None, TPU if use_tpu else None) if r]
        if accelerator is not None:
            named.append(self._resource_of(accelerator))
        if len(set(named)) > 1:
            raise ValueError(
                f"a plan uses one accelerator, got {' and '.join(sorted(set(named)))}: a worker "
                "group of GPUs and TPUs is two plans"
            )
        resource = named[0] if named else None
        devices = {m.resource_name for m in self._registry.managers()}
        stray = sorted(r for r in wanted if r in devices and r != resource)
        if stray:
            hint = "set use_gpu=True" if stray == [GPU] else f"set accelerator={stray[0]!r}"
            raise ValueError(
                f"resources_per_worker asks for {stray[0]} {wanted[stray[0]]!r}, but the plan "
                f"does not use {stray[0]}: {hint}"
            )
        return resource

    def _resource_of(self, accelerator: str) -> str:
        """The resource a family or resource name stands for."""
        managers = self._registry.managers()
        for manager in managers:
            if accelerator in (manager.name, manager.resource_name):
                return manager.resource_name
        known = sorted({m.name for m in managers} | {m.resource_name for m in managers})
        raise ValueError(f"accelerator {accelerator!r} is no family or resource; known: {known}")

    def _per_worker(self, wanted: dict[str, Quantity]) -> dict[str, float]:
        """Each worker's resources: defaults filled in, quantities exact to 1e-4."""
        per_worker = {name: _number(name, value) for name, value in wanted.items()}
        per_worker.setdefault(CPU, 1.0)
        if self.resource == TPU:
            per_worker[TPU] = self._tpu_per_worker(per_worker.get(TPU))
        elif self.resource is not None:
            amount = per_worker.setdefault(self.resource, 1.0)
            if amount == 0:
                raise ValueError(
                    f"the plan uses {self.resource}, but resources_per_worker gives each worker "
                    f"{self.resource} 0; give a positive amount or drop the accelerator"
                )
        if self.accelerator_type is not None and self.resource != TPU:
            if self.resource is None:
                raise ValueError(
                    f"accelerator_type {self.accelerator_type!r} needs an accelerator in the plan"
                )
            per_worker[ACCELERATOR_TYPE_PREFIX + self.accelerator_type] = TYPE_REQUEST
        return per_worker

    def _tpu_per_worker(self, asked: Optional[float]) -> float:
        """Chips a TPU worker takes; the slice from accelerator_type and topology."""
        if self.accelerator_type is None or self.topology is None:
            if self.num_workers > 1:
                raise ValueError(
                    f"{self.num_workers} TPU workers need the slice they run on: give "
                    "accelerator_type (e.g. 'TPU-V6E') and topology (e.g. '4x4')"
                )
            return 1.0 if asked is None else asked
        self.tpu = tpu_slice(self.accelerator_type, self.topology)
        per_host = self.tpu.chips_per_host
        chips = per_host if asked is None else asked
        if chips <= 0 or chips != int(chips) or per_host % int(chips):
            raise ValueError(
                f"TPU {chips:g} per worker does not divide the {per_host} chips of a "
                f"{self.tpu.pod_type} host; ask for a divisor of {per_host}"
            )
        per_slice = self.tpu.hosts * (per_host // int(chips))
        if self.num_workers % per_slice:
            raise ValueError(
                f"{self.num_workers} workers with {int(chips)} chips each do not fill whole "
                f"{self.tpu.pod_type} slices ({self.tpu.hosts} host(s) of {per_host} chips, "
                f"{per_slice} workers a slice); use a multiple of {per_slice} workers"
            )
        self.slices = self.num_workers // per_slice
        return float(chips)

    def _owners(
        self, resource: Optional[str], accelerator: Optional[str]
    ) -> list[AcceleratorManager]:
        """The family the plan names, or every family providing its resource (registry order)."""
        if resource is None:
            return []
        owners = [m for m in self._registry.managers() if m.resource_name == resource]
        named = [m for m in owners if m.name == accelerator]
        return named or owners

    def _check_quantity(self, per_worker: Mapping[str, float]) -> None:
        """Each worker's amount must pass its family's rule (0.5 GPU yes, 0.5 neuron core no)."""
        if self.resource is None or not self.managers:
            return
        amount = per_worker[self.resource]
        problems = []
        for manager in self.managers:
            try:
                family_units(manager, amount)  # a plugin's broken rule is a PluginError
                return
            except InvalidRequest as error:
                problems.append(str(error))
        raise ValueError(f"each worker's {self.resource} {amount:g} is refused: {problems[0]}")

    def _backend(self) -> str:
        """The collective backend the accelerator's family declares, gloo without one."""
        for manager in self.managers:
            if manager.collective_backend:
                return manager.collective_backend
        return GLOO

    # -- the plan -----------------------------------------------------------------------------
    @property
    def bundles(self) -> list[dict[str, float]]:
        """One resource bundle per worker; on a TPU slice the first also takes the slice's head
        resource, so worker 0 lands on the host that starts the others."""
        bundles = [dict(self.per_worker_resources) for _ in range(self.num_workers)]
        if self.tpu is not None and self.tpu.hosts > 1:
            bundles[0][self.tpu.head_resource] = 1.0
        return bundles

    @property
    def total_resources(self) -> dict[str, float]:
        """What every worker together asks for, added exactly (ten 0.1s are 1)."""
        units: dict[str, int] = {}
        for bundle in self.bundles:
            for name, value in bundle.items():
                units[name] = units.get(name, 0) + to_units(value, what=name)
        return {name: from_units(total) for name, total in units.items()}

    @property
    def accelerator_type_demand(self) -> Optional[dict[str, float]]:
        """``{"accelerator_type:A100": 0.001}`` per worker when a type is named, else None."""
        if self.accelerator_type is None or self.resource in (None, TPU):
            return None
        key = ACCELERATOR_TYPE_PREFIX + self.accelerator_type
        return {key: self.per_worker_resources[key]}

    def __repr__(self) -> str:
        return (
            f"ScalingConfig(num_workers={self.num_workers}, per_worker="
            f"{self.per_worker_resources}, backend={self.backend!r})"
        )


def _number(name: object, value: object) -> float:
    """A per-worker amount on the 1e-4 grid; ``ValueError`` naming the resource otherwise."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"resources_per_worker keys are resource names, got {name!r}")
    try:
        units = to_units(value, what=f"resources_per_worker[{name!r}]")
    except InvalidRequest as error:
        raise ValueError(str(error)) from None
    return units / UNIT
