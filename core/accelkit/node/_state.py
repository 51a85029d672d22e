"""The records node detection's steps share: every step reads and changes one :class:`Detection`,
so a step is a plain function of it and :data:`~accelkit.node._detect.STEPS` can list them in
order, each in the module of its own job."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, NamedTuple, Optional

from accelkit._faults import PLUGIN_FAULTS
from accelkit.device import Device
from accelkit.diagnostics import Diagnostic, collecting
from accelkit.node._record import Node
from accelkit.quantities import UNIT

if TYPE_CHECKING:
    from accelkit._settings import Budgets
    from accelkit.host import Host
    from accelkit.manager import AcceleratorManager
    from accelkit.registry import Registry

__all__ = ["NODE_FAMILY", "Detection", "Family", "Override", "noting", "working_copy"]

NODE_FAMILY = "accelkit"
"""The ``family`` of diagnostics about the node's configuration rather than one family."""


class Override(NamedTuple):
    """One requested resource quantity and where it was asked for (for error messages);
    ``configured``: the operator's, from the environment, which every process of the node
    inherits (a granted worker's too), rather than one caller's ``overrides``."""

    units: int
    source: str
    configured: bool = False

    @property
    def device_count(self) -> int:
        return self.units // UNIT


class Family:
    """A family's devices while :func:`~accelkit.node.detect_node` works on them."""

    __slots__ = (
        "detected",
        "devices",
        "excluded",
        "host",
        "manager",
        "origin",
        "partitioned",
        "restriction",
        "tokens",
        "withheld",
    )

    def __init__(self, manager: AcceleratorManager, host: Host, origin: AcceleratorManager) -> None:
        self.manager = manager
        """This detection's own copy of the family's manager (:func:`working_copy`): what its
        ``detect()`` records about the machine (Neuron's sizes for the generation it found)
        stays with this node, whatever other detections run at the same time."""
        self.host = host
        """The family's view of the host: only the variables its manager declares."""
        self.origin = origin
        """The registry's manager the copy was made from (the key of a hung ``detect()``)."""
        self.detected: list[Device] = []
        """What ``detect()`` found (partition parents left out), offered or not: the node's
        ``detected`` count."""
        self.devices: list[Device] = []
        self.tokens: Optional[list[str]] = None
        """What the family's visibility variable names; None when it is unset."""
        self.restriction: Optional[str] = None
        """``VAR='value'`` of the visibility variable that restricts the family, None when
        free."""
        self.excluded: list[Device] = []
        self.withheld: list[Device] = []
        """What ``detect()`` found but does not offer (``Device.offered`` False): never in the
        node, yet its runtime counts it, so a visibility variable naming it reads on."""
        self.partitioned: list[Device] = []
        """Devices ``detect()`` listed beside their partitions, left out for them: their ids
        (and their own parents') are still the host's, so no logical device may take one."""


def working_copy(manager: AcceleratorManager) -> AcceleratorManager:
    """A shallow copy of ``manager`` for one detection; the manager itself where it cannot be
    copied. A manager may set its declarations (``scheduling``) on itself in ``detect()`` from
    what it found, and node detection reads them right after (``Node.families``); on a copy,
    two nodes detected at once by one registry never see each other's."""
    try:
        return copy.copy(manager)
    except PLUGIN_FAULTS:  # a plugin's own __copy__ or __reduce_ex__ failing: share it
        return manager


class Detection:
    """A node being built: what the steps read and change, in
    :data:`~accelkit.node._detect.STEPS` order."""

    __slots__ = (
        "budgets",
        "diagnostics",
        "env",
        "exclusions",
        "families",
        "label_prefix",
        "node",
        "plain",
        "registry",
        "wanted",
    )

    def __init__(
        self,
        registry: Registry,
        env: Mapping[str, str],
        budgets: Budgets,
        label_prefix: str,
        families: list[Family],
        wanted: dict[str, Override],
    ) -> None:
        self.registry = registry
        self.env = env
        self.budgets = budgets
        self.label_prefix = label_prefix
        self.families = families
        self.wanted = wanted
        self.exclusions: dict[str, list[str]] = {}
        self.diagnostics: list[Diagnostic] = []
        self.plain: dict[str, Override] = {}
        self.node = Node()

    @contextlib.contextmanager
    def noting(self, family: Family) -> Iterator[None]:
        """Collect :func:`~accelkit.diagnostics.note` calls made in the block as ``family``'s
        diagnostics."""
        with noting(family.manager.name, self.diagnostics):
            yield


@contextlib.contextmanager
def noting(family: str, sink: list[Diagnostic]) -> Iterator[None]:
    """Collect :func:`~accelkit.diagnostics.note` calls made in the block for ``family`` into
    ``sink``."""
    notes: list[Diagnostic] = []
    try:
        with collecting(family) as notes:
            yield
    finally:  # after collecting() closes, which adds a note of what it cut
        sink.extend(notes)
