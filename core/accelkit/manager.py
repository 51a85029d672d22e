"""``AcceleratorManager``: the contract every vendor plugin fulfils (contract version 2).

A plugin subclasses it, declares its vendor's facts and writes ``detect()``. The contract has
seventeen members and no more: the card's five first (the family ``name``, ``resource_name``,
``detect``, the visibility variable, fractional support; the type label is ``Device.type_label``),
then declarations, then methods with defaults. Grouped declarations are frozen records
(:class:`Scheduling`, :class:`Frameworks`), so a new vendor's quirk becomes a value in a record or
a rule inside its own plugin, never a new knob here. Checks of a manager (its contract errors, its
policy as data, every variable it reads) live in the registry, not on the class.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Optional, final

from accelkit._visibility import NOTHING_VISIBLE, is_index, join_ids, split_ids
from accelkit.device import Device
from accelkit.policy import LOWEST_FREE, Placement, check_quantity

if TYPE_CHECKING:
    from accelkit.host import Host

__all__ = [
    "ACCELERATOR_TYPE_PREFIX",
    "API_VERSION",
    "AcceleratorManager",
    "Frameworks",
    "Scheduling",
]

API_VERSION = 2
"""The contract version this accelkit implements; a manager declares the one it was written for.

Version 2: grouped declarations (``scheduling``, ``frameworks``), and ``visibility_env(ids, *,
total)`` always receives ``total``. A manager declaring version 1 (or nothing) is called as
version 1 was, ``visibility_env(ids)``, and the loader reads its version-1 attributes
(``allowed_quantities``, ``framework_device``, ...) into the records once, with a deprecation
note naming where each moved."""

ACCELERATOR_TYPE_PREFIX = "accelerator_type:"
"""Node resource ``accelerator_type:<label>`` = 1 for every type label a node has."""


@dataclass(frozen=True)
class Scheduling:
    """How a family's devices are handed out, as data a node's JSON carries (``families``).

    Data only, so an ``Allocator`` over a node rebuilt from JSON applies the same rules with no
    plugin loaded.
    """

    allowed_quantities: Optional[tuple[int, ...]] = None
    """Whole-device counts a request may ask for (TPU: 1, 2, 4, 8); None: any whole number."""

    placement: Placement = LOWEST_FREE
    """Which free devices serve a request for several whole devices: ``LOWEST_FREE``,
    ``ALIGNED_BLOCKS`` (TPU chips, Gaudi modules) or ``CONTIGUOUS`` (Neuron cores)."""

    partitions_per_grant: Optional[int] = 1
    """How many partitions (devices with ``parent`` set, e.g. MIG instances) one grant may hold,
    each granted whole. None: partitions are scheduled like any other device."""

    device_file: Optional[str] = None
    """One device's character file, for exports that bind devices to files (SLURM ``gres.conf``
    ``File=``): ``{id}`` standing for its id (``"/dev/rbln{id}"``), or ``{minor}`` for its
    ``Device.minor`` where files are not numbered by id (``"/dev/nvidia{minor}"``; a device
    whose minor detection did not read gets no file). None where ids do not name files one to
    one (Neuron cores share a device file): exports then give a count."""


@dataclass(frozen=True)
class Frameworks:
    """What the family's frameworks need from a worker's environment and device names."""

    device: Optional[str] = None
    """The device name frameworks use (``"cuda"``, ``"xpu"``, ``"hpu"``, ``"npu"``)."""

    indexed: bool = True
    """Whether the framework device names one device (``"cuda:1"``) or the process's one device
    (Gaudi's ``"hpu"``)."""

    collective: Optional[str] = None
    """The collective-communication backend (``"nccl"``, ``"hccl"``, ``"xla"``)."""

    memory_hints: bool = False
    """Whether the family's frameworks read the advisory memory variables a fractional grant may
    carry (JAX's ``XLA_PYTHON_CLIENT_MEM_FRACTION``, TensorFlow's allow-growth): True for CUDA
    and ROCm GPUs, so other families' workers get no variables that mean nothing to them."""

    shared_visibility: bool = False
    """Whether workers on one node may see each other's devices (``Grant.env(peers=...)``), as
    collectives between co-located workers need; False where a device belongs to one process
    (Neuron cores, TPU chips behind libtpu)."""

    platform: Optional[str] = None
    """The hardware's name in XLA-based frameworks, where ``device`` does not say it: JAX's
    ``Device.platform`` (``jax.devices("tpu")``), upper-cased TensorFlow's device type
    (``/device:TPU:0``). PyTorch/XLA names TPU chips and NeuronCores alike ``"xla"``, so those
    families declare ``"tpu"`` and ``"neuron"``. None: taken from ``device``, with CUDA's
    ``"cuda"`` as ``"gpu"`` (JAX and TensorFlow call CUDA and ROCm GPUs that)."""


class AcceleratorManager:
    """One accelerator family: how to find its devices and how to make a process see them.

    Required: :attr:`name`, :attr:`resource_name` and :meth:`detect`. Everything else is
    declared data or a method whose default is right for a typical GPU family.
    """

    # -- the card's five ---------------------------------------------------------------------
    name: ClassVar[str]
    """The family: the key of ``get_manager``, ``Device.family``, ``visible_ids`` and
    ``ACCELKIT_NOSET_<FAMILY>``. Lowercase, e.g. ``"nvidia"``."""

    resource_name: ClassVar[str]
    """The schedulable resource the devices count towards, e.g. ``"GPU"``."""

    def detect(self, host: Host) -> list[Device]:
        """The family's devices on ``host``, in index order.

        Never raises for an absent or broken vendor stack: return ``[]`` and record why with
        :func:`accelkit.note`. Look at the machine only through ``host``.
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement detect()")

    visible_devices_env_var: ClassVar[Optional[str]] = None
    """The primary visibility variable (``CUDA_VISIBLE_DEVICES``), for reading and for display."""

    fractional: ClassVar[bool] = True
    """Whether a request may take a fraction (below 1) of one device."""

    # -- declarations ------------------------------------------------------------------------
    env_vars_read: ClassVar[tuple[str, ...]] = ()
    """Every variable the family's runtime reads, container layers included; empty means the
    primary variable alone. Snapshots record these, and only these."""

    scheduling: Scheduling = Scheduling()
    """Quantities, placement, partitions per grant and the device file, as data."""

    frameworks: Frameworks = Frameworks()
    """Framework device name, collective backend, memory hints, shared visibility."""

    replaces: ClassVar[Optional[str]] = None
    """The family of a built-in this plugin deliberately replaces (a vendor's own plugin)."""

    api_version: ClassVar[int] = 1
    """The contract version the plugin was written against; undeclared is 1, the first.
    Declare ``api_version = accelkit.API_VERSION`` in a new plugin."""

    # -- methods with defaults ---------------------------------------------------------------
    def read_visible(self, env: Mapping[str, str]) -> Optional[list[str]]:
        """The ids the family's runtime would show under ``env``: None when unrestricted.

        ``[]`` when nothing is visible (``""``, ``NoDevFiles``). The default reads a
        comma-separated list of the primary variable, spaces around ids allowed; a family whose
        runtime reads otherwise (stops at a space, takes ranges) overrides it. Any value must
        read without an exception, with one allowance: ``ValueError`` for a value the runtime
        itself would refuse (a range that runs backwards); callers treat that as nothing
        visible and report it.
        """
        var = self.visible_devices_env_var
        if var is None or var not in env:
            return None
        return split_ids(env[var], NOTHING_VISIBLE)

    def visibility_env(
        self, ids: Sequence[str], *, total: Optional[int] = None
    ) -> dict[str, Optional[str]]:
        """Variables that make a process see exactly ``ids`` (None: unset that variable).

        ``total`` is how many devices of the family the node has, None when unknown or when the
        worker's own environment already narrows the family, so a grant of every device can be
        told from a part (the TPU plugin leaves libtpu its whole-host defaults then). accelkit
        always passes it to a version-2 manager.
        """
        if self.visible_devices_env_var is None:
            return {}
        return {self.visible_devices_env_var: join_ids(ids)}

    def matches(self, token: str, device: Device) -> bool:
        """Whether a token of the visibility variable names ``device`` (its id, index or UUID)."""
        if token in (device.id, device.uuid):
            return True
        return is_index(token) and device.index is not None and int(token) == device.index

    def accelerator_type(self, devices: Sequence[Device]) -> Optional[str]:
        """The node's type label for this family (``<prefix><family>.type``): the label every
        device has, None when they have several or none (a family of A100s and T4s has no one
        type, and a pod selecting ``nvidia.type=A100`` must not be given the T4)."""
        labels = {d.type_label for d in devices}
        return labels.pop() if len(labels) == 1 else None

    def additional_resources(self, devices: Sequence[Device], host: Host) -> dict[str, float]:
        """Extra node resources beside the device count (e.g. a TPU slice name)."""
        return {}

    def labels(self, devices: Sequence[Device], host: Host) -> dict[str, str]:
        """Extra node labels; the core prefixes each key with ``<prefix><family>.``."""
        return {}

    # -- the one final helper ----------------------------------------------------------------
    @final
    def validate_quantity(self, quantity: object) -> int:
        """Integer units (1e-4) for ``quantity`` devices, or raise :class:`InvalidRequest`.

        Computed from the declarations (``fractional``, ``scheduling.allowed_quantities``), so
        a node's JSON carries the same rule: never override it.
        """
        return check_quantity(
            quantity,
            family=self.name,
            resource=self.resource_name,
            fractional=self.fractional,
            allowed=self.scheduling.allowed_quantities,
        )

    def __repr__(self) -> str:
        family = getattr(self, "name", "?")
        return f"<{type(self).__name__} {family}:{getattr(self, 'resource_name', '?')}>"
