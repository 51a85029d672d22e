"""Node detection: :func:`detect_node` turns a host into a :class:`~accelkit.Node`, in named steps.

Detection runs every family's ``detect(host)`` on a view of the host whose environment holds only
the variables that manager declares (``env_vars_read``; :class:`~accelkit.host.HostView`), the
same view its ``read_visible``, ``labels`` and ``additional_resources`` get, so that live
detection and a snapshot replay see the same. A type label that cannot name a resource
(``"Acme X1"``) is sanitized there, with a warning (:func:`_resource_label`). Then it applies,
per family and in the order of :data:`STEPS`:

1. **Partitions** (here). A device whose id is another device's ``parent`` (a MIG-enabled GPU
   listed beside its instances) is dropped with a warning: a partition and its parent are never
   both allocatable.
2. **Withheld** (here). A device ``detect()`` returns with ``offered=False`` (a Prohibited
   GPU, an integrated GPU its runtime does not support) is set aside: never in the node, yet
   counted as detected, so its family's variable makes no stand-in devices, and a visibility
   token naming it is passed over as the runtime passes over it (step 5).
3. **Claims** (:mod:`accelkit.node._claims`): a variable a detected family declares as its own
   (MetaX's runtime reads ``CUDA_VISIBLE_DEVICES``) makes no devices of another family; two
   families with devices claiming one variable are an error naming both.
4. **Exclusions** (:mod:`accelkit.node._operator`): ``ACCELKIT_EXCLUDE_DEVICES`` removes devices.
5. **Visibility** (:mod:`accelkit.node._visibility`): a family's visibility variable, when set,
   restricts what exists and supplies the ids; with nothing detected, its ids are logical devices.
6. **Overrides** (:mod:`accelkit.node._operator`): ``overrides=`` and
   ``ACCELKIT_OVERRIDE_RESOURCES`` resize device resources or add plain capacity.

Then resources and labels (:mod:`accelkit.node._resources`) are computed from what is left. A
family whose ``detect`` raises or times out becomes an error diagnostic; the other families still
answer. ``detect()`` runs off the calling thread, and detection returns by one deadline
(``ACCELKIT_DETECT_TIMEOUT``) however many families hang (:mod:`accelkit.host._deadlines`). The
same host always gives an equal node. This module holds the order and runs the families'
``detect()``; each other step lives in the module of its job, whose docstring gives its rules.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Callable, Optional

from accelkit._faults import PLUGIN_FAULTS
from accelkit._settings import DETECT_TIMEOUT_VAR, Budgets
from accelkit._shown import shown
from accelkit._stdout import end_captures
from accelkit._visibility import canonical_id
from accelkit.detect._facts import sanitize_label
from accelkit.device import MAX_DEVICES, Device
from accelkit.diagnostics import Diagnostic, collecting, note
from accelkit.host import Host, HostView, LocalHost
from accelkit.host import _deadlines as deadlines
from accelkit.manager import AcceleratorManager
from accelkit.node._claims import step_claim_clash, step_claims
from accelkit.node._operator import read_exclusions, read_overrides, step_exclusions, step_overrides
from accelkit.node._record import Node
from accelkit.node._resources import DEFAULT_LABEL_PREFIX, step_labels, step_resources
from accelkit.node._state import NODE_FAMILY, Detection, Family, working_copy
from accelkit.node._visibility import step_read_visibility, step_restrict
from accelkit.registry import Registry, family_policy, resolve, variables_read

__all__ = ["STEPS", "detect_node", "run_detection"]


def detect_node(
    host: Optional[Host] = None,
    overrides: Optional[Mapping[str, object]] = None,
    *,
    label_prefix: str = DEFAULT_LABEL_PREFIX,
    registry: Optional[Registry] = None,
) -> Node:
    """Detect every family's devices on ``host`` (this machine when None) and build the node.

    ``overrides`` maps resource -> count and wins over ``ACCELKIT_OVERRIDE_RESOURCES`` for the
    resources it names. ``registry`` chooses the plugins (None: the default registry). Raises
    :class:`~accelkit.ConfigurationError` only for a configuration that contradicts itself (a
    malformed override, or one beyond a visibility variable); detection problems are
    diagnostics. The steps, in order, are :data:`STEPS`; each step's module gives its rules.
    """
    source = LocalHost() if host is None else host
    return run_detection(source, resolve(registry), overrides, label_prefix).node


def run_detection(
    host: Host,
    plugins: Registry,
    overrides: Optional[Mapping[str, object]] = None,
    label_prefix: str = DEFAULT_LABEL_PREFIX,
) -> Detection:
    """:func:`detect_node`, returning the whole finished :class:`Detection`: the node, and each
    family's devices on the way to it (what ``detect()`` returned, those the node left out
    included), for a caller that must know more than the node keeps (a redacted snapshot hides
    every UUID a family reported, not only those of the devices kept)."""
    env = host.env
    wanted = read_overrides(env, overrides)
    managers = plugins.managers()
    state = Detection(
        registry=plugins,
        env=env,
        budgets=Budgets.from_env(os.environ),
        label_prefix=label_prefix,
        families=[
            Family(working_copy(m), HostView(host, variables_read(m)), origin=m) for m in managers
        ],
        wanted=wanted,
    )
    state.diagnostics += _skipped_plugins(plugins)
    state.exclusions = read_exclusions(env, managers, state.diagnostics)
    for _name, step in STEPS:
        step(state)
    state.node.diagnostics = list(dict.fromkeys(state.diagnostics))  # each finding once
    return state


def _skipped_plugins(plugins: Registry) -> list[Diagnostic]:
    """An error for each plugin that failed to load: its families go undetected, and a node read
    as data (``accelkit ls --json``, a scheduler's ``node.diagnostics``) must say why, beside the
    warning a log may drop. (A plugin that is disabled or replaced is no fault.)"""
    return [
        Diagnostic(NODE_FAMILY, "error", f"{info.describe()} was skipped: {info.error}")
        for info in plugins.report()
        if info.status == "error"
    ]


def _step_detect(state: Detection) -> None:
    """Run every family's ``detect()`` off this thread and wait until the detection's deadline:
    a family that raises, or has not answered by then, finds nothing, and the others still
    answer (a hung ``detect()`` cannot be killed; its thread is left, and the family is not
    detected again while it runs)."""
    with deadlines.clock(state.budgets) as running:
        runs = [_FamilyRun(family) for family in state.families]
        deadlines.run_all([run.task for run in runs if run.refused is None], running)
        for run in runs:
            state.diagnostics.extend(run.finish(running))
    end_captures()  # a hung vendor import must not keep accelkit's own stdout
    names = [family.manager.name for family in state.families]
    errors = [d for d in state.diagnostics if d.level == "error"]
    state.registry.record_problems(
        {name: [d.message for d in errors if d.family == name] for name in names}
    )


class _FamilyRun:
    """One family's ``detect()`` as a task off the calling thread, and what came of it."""

    def __init__(self, family: Family) -> None:
        self.family = family
        self.notes: list[Diagnostic] = []
        self.devices: Optional[list[Device]] = None
        self.key = ("detect", id(family.origin))
        self.refused = deadlines.running(self.key)
        self.task = deadlines.Task(self._work, f"{family.manager.name} detect()")

    def _work(self) -> None:
        with collecting(self.family.manager.name) as notes:
            self.notes = notes
            try:
                self.devices = _detect(self.family.manager, self.family.host)
            except BaseException as exc:  # what _detect lets through ends its family alone
                note(f"detect() raised {type(exc).__name__}: {exc}; no devices", "error")

    def finish(self, running: deadlines.Clock) -> list[Diagnostic]:
        """The family's devices set from its task; its findings returned."""
        name, task = self.family.manager.name, self.task
        self.family.devices = []
        if self.refused is not None:
            return [Diagnostic(name, "error", f"detection skipped: {self.refused}")]
        if task.finished.is_set():
            self.family.devices = self.devices or []
            return list(self.notes)
        if task.thread is not None:
            deadlines.remember(self.key, task.name, task.began, task.thread)
        budget = f"{running.budgets.detection:g}s ({DETECT_TIMEOUT_VAR})"
        cut = f"detect() did not finish within {budget}; no devices"
        return [*self.notes, Diagnostic(name, "error", cut)]


def _step_partitions(state: Detection) -> None:
    """A device listed with its partitions is left out: only the partitions are allocatable."""
    for family in state.families:
        with state.noting(family):
            family.devices, family.partitioned = _split_partitioned_parents(family.devices)
            family.detected = list(family.devices)


def _step_withheld(state: Detection) -> None:
    """A device its plugin does not offer is set aside; it stays counted as detected."""
    for family in state.families:
        family.withheld = [d for d in family.devices if not d.offered]
        family.devices = [d for d in family.devices if d.offered]


def _step_devices(state: Detection) -> None:
    """The node's devices are what the families kept; it also carries each family's detected
    count and declared policy, so a scheduler allocates over its JSON without the plugins."""
    state.node.devices = [d for f in state.families for d in f.devices]
    state.node.detected = {f.manager.name: len(f.detected) for f in state.families if f.detected}
    state.node.policies = {f.manager.name: family_policy(f.manager) for f in state.families}


STEPS: tuple[tuple[str, Callable[[Detection], None]], ...] = (
    ("detect", _step_detect),
    ("partitions", _step_partitions),
    ("withheld", _step_withheld),
    ("claims", step_claims),
    ("read visibility", step_read_visibility),
    ("exclusions", step_exclusions),
    ("claim clash", step_claim_clash),
    ("visibility", step_restrict),
    ("overrides", step_overrides),
    ("devices", _step_devices),
    ("resources", step_resources),
    ("labels", step_labels),
)
"""Node detection, step by step, in order (each step's module docstring gives its rules)."""


def _detect(manager: AcceleratorManager, host: Host) -> list[Device]:
    """The family's devices with family, resource and index filled; never raises."""
    try:
        result = manager.detect(host)
    except TimeoutError as exc:
        note(f"detection timed out: {exc}", "error")
        return []
    except PLUGIN_FAULTS as exc:  # one broken family must not hide the others
        note(f"detection failed: {type(exc).__name__}: {exc}", "error")
        return []
    if not isinstance(result, (list, tuple)) or not all(isinstance(d, Device) for d in result):
        note(f"detect() returned {shown(result, 200)}, not a list of Device; ignoring it", "error")
        return []
    if len(result) > MAX_DEVICES:
        note(
            f"detect() found {len(result)} devices; keeping the first {MAX_DEVICES} "
            "(accelkit.detect.MAX_DEVICES per family)",
            "error",
        )
        result = result[:MAX_DEVICES]
    devices: list[Device] = []
    seen: set[str] = set()
    for position, device in enumerate(result):
        if canonical_id(device.id) in seen:  # "00" is GPU 0 to every runtime
            note(f"device id {device.id!r} was detected twice; keeping the first", "warning")
            continue
        seen.add(canonical_id(device.id))
        devices.append(
            device.replace(
                family=manager.name,
                resource_name=manager.resource_name,
                index=position if device.index is None else device.index,
                type_label=_resource_label(device.type_label),
            )
        )
    return devices


_NOT_IN_A_LABEL = r"[\s,=\"'`$\\]"
"""What a type label must not hold: the node resource ``accelerator_type:<label>`` is a name
requests give (no blanks), and ``ray start --resources`` and ``dask worker --resources
"NAME=VALUE ..."`` carry it (no blanks, commas, ``=``, quotes, ``$`` or backslashes)."""


def _resource_label(label: Optional[str]) -> Optional[str]:
    """``label`` when it can name a resource, else :func:`accelkit.detect.sanitize_label` of it,
    with a warning (None, dropping the label, when nothing of it is usable).

    Sanitized rather than refused: the device is fine and the label still says what it is,
    whereas ``"Acme X1"`` kept would make a resource no request can name, and make
    ``to_ray``/``to_dask`` fail for the whole node.
    """
    if label is None or (label.isprintable() and not re.search(_NOT_IN_A_LABEL, label)):
        return label
    safe = sanitize_label(label)
    done = f"using {safe!r}" if safe else "dropping it"
    note(
        f"type label {label!r} cannot name a resource (blanks, commas, '=', quotes, '$' and "
        f"backslashes break requests and the Ray and Dask exports): {done}; a plugin should "
        "give labels through accelkit.detect.type_label() or sanitize_label()",
        "warning",
    )
    return safe


def _split_partitioned_parents(devices: list[Device]) -> tuple[list[Device], list[Device]]:
    """(kept, left out): a device listed together with its partitions is left out for them."""
    parents = {d.parent for d in devices if d.parent}
    for device in devices:
        if device.id in parents:
            count = sum(1 for d in devices if d.parent == device.id)
            note(
                f"device {device.id} was listed with its {count} partition(s); only the "
                "partitions are allocatable, so the device itself is left out",
                "warning",
            )
    kept = [d for d in devices if d.id not in parents]
    return kept, [d for d in devices if d.id in parents]
