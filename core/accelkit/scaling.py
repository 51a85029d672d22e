"""Training plans: N workers, each with accelerators of any family, as bundles a scheduler places.

Ray Train's ``ScalingConfig`` knows GPUs and TPUs; :class:`ScalingConfig` here knows every
family a plugin provides (``accelerator="neuron"``, ``"gaudi"``, ``"acme"``) and takes each
family's rules from its manager: the quantity rule per worker, the collective backend, the
framework device. It also refuses what Ray quietly changes: ``use_gpu`` with 0 GPUs per worker
(Ray makes it 1), ``accelerator_type`` with 0 of its resource (Ray makes it 0.001), GPUs and TPUs
in one plan, a TPU plan whose workers cannot fill its slice, a worker that asks for nothing.

TPU plans mean what Ray Train's guide says: each worker is one TPU VM host, so ``num_workers`` is
a multiple of the slice's hosts and counts slices (8 workers on a 4-host slice are two slices);
``resources_per_worker={"TPU": 2}`` makes each worker use 2 of its host's chips and leaves the
worker count alone. Each slice's first bundle holds the slice's head resource, so a scheduler
reserves one head per slice, as Ray reserves each slice by its head before placing the rest.

Slice shapes (:func:`tpu_slice`) belong to the family whose hosts form multi-host slices: the
plan asks that family's manager for them through a method the plugin offers,
``slice_shape(accelerator_type, topology)``, which is no member of the plugin contract. The TPU
plugin offers it over its table of TPU generations; a family without it cannot size a plan by
accelerator type and topology, and says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Optional, Protocol, Union, runtime_checkable

from accelkit.errors import InvalidRequest, UnknownFamily
from accelkit.manager import ACCELERATOR_TYPE_PREFIX, AcceleratorManager
from accelkit.quantities import UNIT, from_units, to_units
from accelkit.registry import Registry, resolve

__all__ = ["GLOO", "PodSlice", "ScalingConfig", "tpu_slice"]

GLOO = "gloo"
"""The collective backend of a plan without accelerators (CPU workers)."""

CPU = "CPU"
GPU = "GPU"
TPU = "TPU"
TYPE_REQUEST = 0.001
"""What a worker asks of ``accelerator_type:<label>``: a token amount, as Ray does."""


_SLICE_SHAPE = "slice_shape"
"""The method a family's manager offers when its hosts form multi-host slices (the TPU plugin's
``TpuManager.slice_shape``): ``(accelerator_type, topology) -> PodSlice``, ``ValueError`` for a
shape the family does not have. Asked for by name, so the plugin contract stays as it is."""


@runtime_checkable
class PodSlice(Protocol):
    """One multi-host slice, as a family's ``slice_shape`` describes it (the TPU plugin's
    ``TpuSlice``): what a plan needs to fill whole slices and start each on its first host.
    ``isinstance`` checks a record has every field, as a plan does. A record may also give
    ``type_label``, the label its hosts give their devices ("TPU-V6E", which they advertise as
    ``accelerator_type:TPU-V6E``): each worker then asks for it; a record without (a plugin
    written before it) lands its workers on any host of the resource."""

    @property
    def chips(self) -> int:
        """Devices in the whole slice."""

    @property
    def chips_per_host(self) -> int:
        """Devices on each of its hosts."""

    @property
    def hosts(self) -> int:
        """Hosts in the slice: each runs one worker group."""

    @property
    def pod_type(self) -> str:
        """The slice's accelerator type, as the family names it ("v6e-16")."""

    @property
    def head_resource(self) -> str:
        """The resource only the slice's first host offers, where one task starts the others."""


def tpu_slice(
    accelerator_type: str, topology: str, *, registry: Optional[Registry] = None
) -> PodSlice:
    """The slice of ``accelerator_type`` ("v6e", "TPU-V6E", "v6e-16", "v5e") shaped ``topology``
    ("4x4"), as the ``tpu`` family's plugin shapes it: chips, chips per host, hosts, pod type.

    ``ValueError`` naming the value for a shape the plugin refuses, and when the registry (None:
    the default one) has no ``tpu`` family or its manager offers no slice shapes.
    """
    try:
        manager = resolve(registry).get_manager("tpu")
    except UnknownFamily as error:
        raise ValueError(f"no TPU slice can be shaped: {error}") from None
    return _pod_slice([manager], accelerator_type, topology)


def _pod_slice(
    managers: Sequence[AcceleratorManager], accelerator_type: str, topology: str
) -> PodSlice:
    """The slice shaped by the first of ``managers`` that offers slice shapes; ``ValueError``
    when its record lacks a field of :class:`PodSlice` (a family written before a field was)."""
    for manager in managers:
        shape = getattr(manager, _SLICE_SHAPE, None)
        if callable(shape):
            pod_slice = shape(accelerator_type, topology)
            if not isinstance(pod_slice, PodSlice):
                raise ValueError(
                    f"family {manager.name!r} shaped {pod_slice!r}, which is no PodSlice: a slice "
                    "has chips, chips_per_host, hosts, pod_type and head_resource; update the "
                    "plugin"
                )
            return pod_slice
    if not managers:
        raise ValueError(
            f"no loaded family provides {TPU}, so accelerator_type {accelerator_type!r} and "
            f"topology {topology!r} shape no slice; `accelkit plugins` says why"
        )
    families = ", ".join(repr(manager.name) for manager in managers)
    raise ValueError(
        f"no slice shapes from family {families}: its manager has no {_SLICE_SHAPE}() method, so "
        f"accelerator_type {accelerator_type!r} and topology {topology!r} cannot size a plan"
    )


Quantity = Union[int, float]


class ScalingConfig:
    """``num_workers`` workers, each with the same resources: what a training job asks for.

    ``accelerator`` names a family ("nvidia", "neuron", "acme") or a resource ("GPU",
    "neuron_cores"); ``use_gpu`` and ``use_tpu`` are the seed's spellings of ``"GPU"`` and
    ``"TPU"``. Each worker takes 1 of it unless ``resources_per_worker`` says otherwise
    (``{"GPU": 0.5, "CPU": 4}``), and 1 CPU unless it names CPUs; an amount of 0 is none of it,
    left out of the bundles as Ray leaves it (``{"CPU": 0}``: no CPU). ``accelerator_type``
    ("A100") lands every worker on that type's nodes, CPU workers too, by a token amount
    (0.001) of ``accelerator_type:A100`` unless ``resources_per_worker`` gives one; a TPU plan
    asks for its hosts' label (``accelerator_type:TPU-V6E``). TPU plans take their slice from
    ``accelerator_type`` and ``topology``, shaped by the family (as :func:`tpu_slice` shows
    them): each worker is one host of a slice and gets the host's chips unless it asks for
    fewer (``{"TPU": 2}``: 2 of each host's chips, still one worker a host); ``num_workers``
    must be a multiple of the slice's hosts, ``slices`` says how many slices it fills and
    :meth:`slice_of` which slice each worker is on. ``backend`` overrides the family's
    declared collective backend. Every refusal is a ``ValueError`` naming the value and what
    the user can do instead. ``registry`` supplies the families (None: the default one).
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
        wanted = {
            name: _number(name, value) for name, value in dict(resources_per_worker or {}).items()
        }
        self.resource = self._accelerator(use_gpu, use_tpu, accelerator, wanted)
        self.tpu: Optional[PodSlice] = None
        self.slices = 0
        self.managers = self._owners(self.resource, accelerator)
        per_worker = self._per_worker(wanted)
        self.per_worker_resources: dict[str, float] = per_worker
        self._check_quantity(per_worker)
        self.backend = backend or self._backend()

    # -- what each worker asks for -----------------------------------------------------------
    def _accelerator(
        self,
        use_gpu: bool,
        use_tpu: bool,
        accelerator: Optional[str],
        wanted: Mapping[str, float],
    ) -> Optional[str]:
        """The accelerator resource of the plan (None: CPU workers), from the three spellings."""
        named = [r for r in (GPU if use_gpu else None, TPU if use_tpu else None) if r]
        if accelerator is not None:
            named.append(self._resource_of(accelerator))
        if len(set(named)) > 1:
            both = " and ".join(sorted(set(named)))
            raise ValueError(
                f"a plan uses one accelerator, got {both}: a worker group of {both} is two plans"
            )
        resource = named[0] if named else None
        if self.topology is not None and resource != TPU:
            raise ValueError(
                f"topology {self.topology!r} shapes a TPU slice; this plan uses "
                f"{resource or 'no accelerator'}: set use_tpu=True or drop topology"
            )
        devices = {m.resource_name for m in self._registry.managers()}
        stray = sorted(r for r, amount in wanted.items() if amount and r in devices - {resource})
        if stray:
            spelled = {GPU: "set use_gpu=True", TPU: "set use_tpu=True"}
            hint = spelled.get(stray[0], f"set accelerator={stray[0]!r}")
            raise ValueError(
                f"resources_per_worker asks for {stray[0]} {wanted[stray[0]]:g}, but the plan "
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

    def _per_worker(self, wanted: Mapping[str, float]) -> dict[str, float]:
        """Each worker's resources, as Ray fills them in: an amount given as 0 is none of it and
        left out (a placement group refuses a bundle holding a 0), 1 CPU unless CPU is named,
        the accelerator (1, or a TPU host's chips) and the type's token amount unless given.

        What the plan itself needs at 0 is refused where Ray quietly puts the default back.
        """
        if self.resource is not None and wanted.get(self.resource) == 0:
            raise ValueError(
                f"the plan uses {self.resource}, but resources_per_worker gives each worker "
                f"{self.resource} 0; give a positive amount or drop the accelerator"
            )
        per_worker = {name: amount for name, amount in wanted.items() if amount}
        if CPU not in wanted:
            per_worker[CPU] = 1.0
        if self.resource == TPU:
            per_worker[TPU] = self._tpu_per_worker(per_worker.get(TPU))
        elif self.resource is not None:
            per_worker.setdefault(self.resource, 1.0)
        demand = self._type_resource()
        if demand is not None:
            if wanted.get(demand) == 0:
                raise ValueError(
                    f"the plan names accelerator_type {self.accelerator_type!r}, but "
                    f"resources_per_worker gives each worker {demand} 0; give a positive amount "
                    "or drop accelerator_type"
                )
            per_worker.setdefault(demand, TYPE_REQUEST)
        if not per_worker:
            zeros = " and ".join(f"{name} 0" for name in wanted)
            raise ValueError(
                f"resources_per_worker gives each worker {zeros}, so it asks for nothing, and a "
                "placement group refuses an empty bundle: give it CPU (leave CPU out for 1) or "
                "another resource"
            )
        return per_worker

    def _type_resource(self) -> Optional[str]:
        """The resource that lands a worker on ``accelerator_type``'s nodes, None without a type.

        A TPU plan asks for the label its slice's hosts advertise ("v6e", "v6e-16" and
        "TPU-V6E" all mean ``TPU-V6E``), when the slice names it (:class:`PodSlice`). A TPU plan
        without ``topology`` has no slice to read the label from, so it asks for none, as
        Ray's does unless resources_per_worker is given.
        """
        if self.accelerator_type is None or (self.resource == TPU and self.tpu is None):
            return None
        if self.tpu is None:
            return ACCELERATOR_TYPE_PREFIX + self.accelerator_type
        label = getattr(self.tpu, "type_label", None)  # optional: see PodSlice
        return None if label is None else ACCELERATOR_TYPE_PREFIX + label

    def _tpu_per_worker(self, asked: Optional[float]) -> float:
        """Chips a TPU worker takes, one worker a host of the slice that accelerator_type and
        topology shape; sets how many slices the workers fill.

        The chips asked for never change how many workers a slice holds: Ray Train's override
        (``{"TPU": 2}`` on a 4-chip host) leaves each worker its own host. Which counts a host
        splits into (1, 2, 4, 8 chips) is the family's quantity rule, checked afterwards.
        """
        if self.accelerator_type is None or self.topology is None:
            if self.num_workers > 1:
                raise ValueError(
                    f"{self.num_workers} TPU workers need the slice they run on: give "
                    "accelerator_type (e.g. 'TPU-V6E') and topology (e.g. '4x4')"
                )
            return 1.0 if asked is None else asked
        self.tpu = _pod_slice(self.managers, self.accelerator_type, self.topology)
        hosts, per_host = self.tpu.hosts, self.tpu.chips_per_host
        chips = float(per_host) if asked is None else asked
        if chips > per_host:
            raise ValueError(
                f"resources_per_worker asks for TPU {chips:g}, but each worker is one "
                f"{self.tpu.pod_type} host, which has {per_host} chips: ask for at most "
                f"{per_host}, or leave TPU out to use the whole host"
            )
        if self.num_workers % hosts:
            below = self.num_workers // hosts * hosts
            counts = " or ".join(
                f"{n} ({n // hosts} slice{'s' if n > hosts else ''})"
                for n in (below, below + hosts)
                if n
            )
            raise ValueError(
                f"{self.num_workers} TPU workers do not fill whole {self.tpu.pod_type} slices: "
                f"each worker is one host and a {self.topology} slice has {hosts} hosts, so "
                f"num_workers is a multiple of {hosts}, such as {counts}; resources_per_worker "
                "sets the chips each worker uses on its host, not the number of workers"
            )
        self.slices = self.num_workers // hosts
        return chips

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
                manager.validate_quantity(amount)
                return
            except InvalidRequest as error:
                problems.append(str(error))
        host = ""
        if self.tpu is not None:
            host = (
                f" (each worker is one {self.tpu.pod_type} host of {self.tpu.chips_per_host} chips)"
            )
        raise ValueError(
            f"each worker's {self.resource} {amount:g} is refused: {problems[0]}{host}"
        )

    def _backend(self) -> str:
        """The collective backend the accelerator's family declares, gloo without one."""
        for manager in self.managers:
            if manager.frameworks.collective:
                return manager.frameworks.collective
        return GLOO

    # -- the plan -----------------------------------------------------------------------------
    @property
    def bundles(self) -> list[dict[str, float]]:
        """One resource bundle per worker. On TPU slices the first bundle of each slice also
        takes the slice's head resource (one per slice, single-host slices too): reserving the
        heads reserves the slices, and each slice's first worker lands on the host that starts
        the others."""
        bundles = [dict(self.per_worker_resources) for _ in range(self.num_workers)]
        if self.tpu is not None:
            for first in range(0, self.num_workers, self.tpu.hosts):
                bundles[first][self.tpu.head_resource] = 1.0
        return bundles

    @property
    def placement_strategy(self) -> str:
        """How a scheduler spreads the bundles, in Ray's placement-group words: on TPU slices
        ``"STRICT_SPREAD"``, since each worker is a host of its own even when it uses only
        some of the host's chips; otherwise ``"PACK"``, Ray Train's default."""
        return "STRICT_SPREAD" if self.tpu is not None else "PACK"

    def slice_of(self, worker: int) -> int:
        """The slice (0 .. ``slices`` - 1) that ``worker`` (its rank, the index of its bundle)
        runs on: each slice's workers are consecutive, its first one holding the head.

        ``ValueError`` for a rank outside the plan, or a plan on no TPU slice.
        """
        if self.tpu is None:
            raise ValueError(
                "this plan runs on no TPU slice, so its workers have no slice: a plan with "
                "use_tpu=True, accelerator_type and topology has slices"
            )
        if isinstance(worker, bool) or not isinstance(worker, int):
            raise ValueError(f"a worker is its rank, a whole number, not {worker!r}")
        if not 0 <= worker < self.num_workers:
            raise ValueError(
                f"worker {worker} is not in this plan of {self.num_workers} workers "
                f"(ranks 0 to {self.num_workers - 1})"
            )
        return worker // self.tpu.hosts

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
        """``{"accelerator_type:A100": 0.001}`` per worker when a type is named, CPU plans too
        (their workers land on that type's nodes); a TPU plan's key is its hosts' type label
        (``accelerator_type:TPU-V6E``). None without a type, or a TPU plan without a slice."""
        key = self._type_resource()
        return None if key is None else {key: self.per_worker_resources[key]}

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
