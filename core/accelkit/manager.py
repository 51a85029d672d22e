"""``AcceleratorManager``: the contract every vendor plugin fulfils.

A plugin subclasses it, declares its vendor's facts as class attributes and writes ``detect()``.
Everything else has a default that is right for a typical GPU family, so a plugin overrides only
where its vendor differs. Vendor facts belong here as data, never as branches in the core.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar, Optional

from accelkit._visibility import NOTHING_VISIBLE, is_index, join_ids, split_ids
from accelkit.device import Device
from accelkit.policy import LOWEST_FREE, PLACEMENTS, FamilyPolicy, Placement

if TYPE_CHECKING:
    from accelkit.host._host import Host

__all__ = [
    "ACCELERATOR_TYPE_PREFIX",
    "API_VERSION",
    "AcceleratorManager",
]

API_VERSION = 2
"""The contract version this accelkit implements; a manager declares the one it was written for.

Version 2: ``visibility_env(ids, *, total=None)`` always receives ``total``. Managers declaring
version 1 (or nothing) are called as version 1 was: ``visibility_env(ids)``."""

ACCELERATOR_TYPE_PREFIX = "accelerator_type:"
"""Node resource ``accelerator_type:<label>`` = 1 for every type label a node has."""

_FAMILY = re.compile(r"^[a-z][a-z0-9_]*$")
_RESOURCE = re.compile(r"^[A-Za-z][A-Za-z0-9_.\-]*$")


class AcceleratorManager:
    """One accelerator family: how to find its devices and how to make a process see them.

    Required: :attr:`name` (the family, e.g. ``"nvidia"``), :attr:`resource_name` (e.g.
    ``"GPU"``) and :meth:`detect`. Everything else is declared data with defaults.
    """

    name: ClassVar[str]
    """The family: the key of ``get_manager``, ``Device.family``, ``visible_ids`` and
    ``ACCELKIT_NOSET_<FAMILY>``. Lowercase, e.g. ``"nvidia"``."""

    resource_name: ClassVar[str]
    """The schedulable resource the devices count towards, e.g. ``"GPU"``."""

    api_version: ClassVar[int] = 1
    """The accelkit contract version the plugin was written against; undeclared is 1, the
    first. Declare ``api_version = accelkit.API_VERSION`` in a new plugin."""

    visible_devices_env_var: ClassVar[Optional[str]] = None
    """The primary visibility variable (``CUDA_VISIBLE_DEVICES``), for reading and for display."""

    env_vars_read: ClassVar[tuple[str, ...]] = ()
    """Every variable the family's runtime reads, container layers included; defaults to the
    primary variable. Snapshots record these, and only these."""

    nothing_visible: ClassVar[tuple[str, ...]] = NOTHING_VISIBLE
    """Values of the variable that mean "no device visible"."""

    tolerates_whitespace: ClassVar[bool] = True
    """Whether the family's runtime reads ids with spaces around them (``" 0, 1"``); False where
    it stops at the first such token (CANN), so ``read_visible`` must too."""

    fractional: ClassVar[bool] = True
    """Whether a request may take a fraction (below 1) of one device."""

    allowed_quantities: ClassVar[Optional[tuple[int, ...]]] = None
    """Whole-device counts a request may ask for (TPU: 1, 2, 4, 8); None: any whole number."""

    placement: ClassVar[Placement] = LOWEST_FREE
    """Which free devices may serve a request for several whole devices."""

    partitions_per_grant: ClassVar[Optional[int]] = 1
    """How many partitions (devices with ``parent`` set, e.g. MIG instances) one grant may hold;
    each is granted whole. None: partitions are scheduled like any other device."""

    framework_device: ClassVar[Optional[str]] = None
    """The device name frameworks use (``"cuda"``, ``"xpu"``, ``"hpu"``, ``"npu"``)."""

    framework_device_indexed: ClassVar[bool] = True
    """Whether the framework device names one device (``"cuda:1"``) or the process's one
    device (Gaudi's ``"hpu"``)."""

    collective_backend: ClassVar[Optional[str]] = None
    """The collective-communication backend (``"nccl"``, ``"hccl"``, ...)."""

    shared_visibility: ClassVar[bool] = False
    """Whether workers on one node may see each other's devices (``Grant.env(peers=...)``), as
    collectives between co-located workers need; False where devices are exclusive to one
    process (Neuron cores, TPU chips behind libtpu)."""

    framework_memory_hints: ClassVar[bool] = False
    """Whether the family's frameworks read the advisory memory variables a fractional grant
    may carry (JAX's ``XLA_PYTHON_CLIENT_MEM_FRACTION``, TensorFlow's allow-growth): True for
    CUDA and ROCm GPUs. Left False, the family's workers get no variables that mean nothing to
    their frameworks."""

    device_file: ClassVar[Optional[str]] = None
    """The character file of one device, with ``{id}`` standing for its id (``"/dev/nvidia{id}"``),
    for exports that bind devices to files (SLURM ``gres.conf`` ``File=``). None where ids do
    not name files one to one (Neuron cores share a device file); exports then give a count."""

    replaces: ClassVar[Optional[str]] = None
    """The family of a built-in this plugin deliberately replaces (a vendor's own plugin)."""

    # -- detection ---------------------------------------------------------------------------
    def detect(self, host: Host) -> list[Device]:
        """The family's devices on ``host``, in index order.

        Never raises for an absent or broken vendor stack: return ``[]`` and record why with
        :func:`accelkit.note`. Look at the machine only through ``host``.
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement detect()")

    # -- visibility --------------------------------------------------------------------------
    def all_env_vars_read(self) -> tuple[str, ...]:
        """:attr:`env_vars_read`, or the primary variable when none are declared."""
        if self.env_vars_read:
            return self.env_vars_read
        return (self.visible_devices_env_var,) if self.visible_devices_env_var else ()

    def read_visible(self, env: Mapping[str, str]) -> Optional[list[str]]:
        """The ids the family's runtime would show under ``env``: None when unrestricted.

        ``[]`` when nothing is visible (``""``, ``NoDevFiles``). Tolerates whitespace around
        ids; returns ids without it. Any value and any combination of the variables must read
        without an exception, with one allowance: ``ValueError`` for a value the family's
        runtime itself would refuse (a range that runs backwards). Callers treat that as
        nothing visible and report it.
        """
        var = self.visible_devices_env_var
        if var is None or var not in env:
            return None
        return split_ids(env[var], self.nothing_visible)

    def matches(self, token: str, device: Device) -> bool:
        """Whether a token of the visibility variable names ``device`` (its id, index or UUID)."""
        return token in (device.id, device.uuid) or (
            is_index(token) and device.index is not None and int(token) == device.index
        )

    def visibility_env(
        self, ids: Sequence[str], *, total: Optional[int] = None
    ) -> dict[str, Optional[str]]:
        """Variables that make a process see exactly ``ids`` (None: unset that variable).

        ``total`` is how many devices of the family the host has, when the worker would
        otherwise see them all (None when unknown or when the worker's own environment already
        narrows the family), so a grant of every device can be told from a part: the TPU plugin
        leaves libtpu its whole-host defaults then. Since contract version 2 every call passes
        it; a manager declaring ``api_version = 1`` is called with ``ids`` only.
        """
        if self.visible_devices_env_var is None:
            return {}
        return {self.visible_devices_env_var: join_ids(ids)}

    # -- quantities --------------------------------------------------------------------------
    def validate_quantity(self, quantity: object) -> int:
        """Integer units (1e-4) for ``quantity`` devices, or raise :class:`InvalidRequest`.

        The default applies the declared rule (``fractional``, ``allowed_quantities``); a manager
        that overrides it has a rule no node JSON can carry (see :meth:`policy`).
        """
        return self.policy().validate_quantity(quantity)

    def policy(self) -> FamilyPolicy:
        """The family's scheduling rules as data, for a node's JSON (``Node.to_dict``)."""
        cls = type(self)
        rules = []
        if cls.validate_quantity is not AcceleratorManager.validate_quantity:
            rules.append("validate_quantity")
        if PLACEMENTS.get(self.placement.name) is not self.placement:
            rules.append("placement")
        return FamilyPolicy(
            name=self.name,
            resource_name=self.resource_name,
            fractional=self.fractional,
            allowed_quantities=self.allowed_quantities,
            placement=self.placement if "placement" not in rules else PLACEMENTS["lowest-free"],
            partitions_per_grant=self.partitions_per_grant,
            visible_devices_env_var=self.visible_devices_env_var,
            device_file=self.device_file,
            plugin_rules=tuple(rules),
        )

    # -- naming ------------------------------------------------------------------------------
    def accelerator_type(self, devices: Sequence[Device]) -> Optional[str]:
        """The node's type label for this family: the first device's label (None if unlabelled)."""
        return next((d.type_label for d in devices if d.type_label), None)

    def additional_resources(self, devices: Sequence[Device], host: Host) -> dict[str, float]:
        """Extra node resources beside the device count (e.g. a TPU slice name)."""
        return {}

    def labels(self, devices: Sequence[Device], host: Host) -> dict[str, str]:
        """Extra node labels; the core prefixes each key with ``<prefix><family>.``."""
        return {}

    # -- contract ----------------------------------------------------------------------------
    def contract_errors(self) -> list[str]:
        """What is wrong with this manager's declarations, as sentences; empty when valid."""
        errors: list[str] = []
        cls = type(self).__name__
        name = getattr(self, "name", None)
        if not isinstance(name, str) or not _FAMILY.match(name):
            errors.append(f"{cls}.name must be a lowercase identifier like 'nvidia', got {name!r}")
        resource = getattr(self, "resource_name", None)
        if not isinstance(resource, str) or not _RESOURCE.match(resource):
            errors.append(f"{cls}.resource_name must be a name like 'GPU', got {resource!r}")
        elif resource.startswith(ACCELERATOR_TYPE_PREFIX.rstrip(":")):
            errors.append(f"{cls}.resource_name {resource!r} collides with accelerator_type:")
        if not isinstance(self.api_version, int) or not 1 <= self.api_version <= API_VERSION:
            errors.append(
                f"{cls}.api_version is {self.api_version!r}; "
                f"this accelkit supports 1..{API_VERSION}"
            )
        if self.allowed_quantities is not None and (
            not self.allowed_quantities
            or any(not isinstance(n, int) or n < 1 for n in self.allowed_quantities)
        ):
            errors.append(
                f"{cls}.allowed_quantities must be positive whole numbers, got "
                f"{self.allowed_quantities!r}"
            )
        if not isinstance(self.placement, Placement):
            errors.append(f"{cls}.placement must be a Placement, got {self.placement!r}")
        if type(self).detect is AcceleratorManager.detect:
            errors.append(f"{cls} must implement detect(host)")
        return errors

    def __repr__(self) -> str:
        family = getattr(self, "name", "?")
        return f"<{type(self).__name__} {family}:{getattr(self, 'resource_name', '?')}>"
