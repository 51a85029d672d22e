"""SLURM ``gres.conf`` lines for this node, and the ``slurm.conf`` strings to match.

One line per family and run of devices of one type, in the devices' index order: ``Name`` is the
resource in lowercase (``gpu``, ``npu``, ``neuron_cores``), ``Type`` the type label in lowercase.
Where the family declares its devices' files (``Scheduling.device_file``) and every device of the
line has one, the line binds them (``File=/dev/nvidia[4-7,0-3]``, in the devices' PCI order) and
SLURM can tell jobs which devices they got; otherwise it gives a ``Count``. A device's file is
numbered by its id or by its ``minor``, as the family's template says (an NVIDIA GPU's minor is not
its index: ``/dev/nvidia{minor}``); a partition, a device made by an override or a visibility
variable, or one whose minor detection did not read has no file: SLURM stats every file it is given
and stops when one is missing, and its cgroup would give a job a file that is another device. SLURM
sets a visibility variable only for ``gpu`` devices bound to their files, of the GPU vendors its
``Flags`` name; for every other line a comment above it says so (a TaskProlog sets it:
docs/running-at-scale.md). AMD and Intel GPUs are counts too: their files are DRM render nodes
(``/dev/dri/renderD128``...), which a node record does not map to the ids ROCr and Level Zero use
(and a Max 1550 is two Level Zero devices on one render node).

SLURM numbers the files of one name by their place in the file, across its records
(``src/interfaces/gres.c``, ``_foreach_fill_in_gres_devices``), and writes that place into a
job's ``CUDA_VISIBLE_DEVICES`` (``gres_common.c``, ``common_gres_set_env``). So the place must be
the GPU's id: the records follow the devices' index order, a type that changes midway (an A100
between H100s) starting a new record of its type rather than moving its devices after the
others. Where the ids are not 0 to N-1 (an excluded GPU) no order gives each GPU its place: only
``ConstrainDevices=yes`` in ``cgroup.conf`` makes SLURM number a job's devices from 0 among
those its cgroup lets it see, and a comment and a warning say so.

slurmd stops at start (``src/interfaces/gres.c``) when the records of one name mix ``File=``
with ``Count=``, or typed with untyped ones, or hold two with neither: so one name's records
agree. If any of them has no files, all of them are counts; if a name has several records, each
has a type (an untyped family's devices take the family's name). A comment line says what was
done and why.

The comment lines on top give ``slurm.conf``'s two strings: ``GresTypes=`` (cluster-wide; SLURM
manages no generic resource it does not name) and ``Gres=`` (this node's ``NodeName`` line).
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from accelkit._visibility import is_index
from accelkit.policy import file_number_field

if TYPE_CHECKING:
    from accelkit.device import Device
    from accelkit.node._record import Node

__all__ = ["to_gres"]

SLURM_ENV_FLAGS = {
    "CUDA_VISIBLE_DEVICES": "nvidia_gpu_env",
    "ROCR_VISIBLE_DEVICES": "amd_gpu_env",
    "ZE_AFFINITY_MASK": "intel_gpu_env",
}
"""SLURM's ``gres.conf`` environment flags, by the variable each makes SLURM set."""

_NOT_A_WORD = r"[^a-z0-9_.\-]"
"""SLURM reads ``Name``/``Type`` up to ``:``, ``,``, ``=`` or a blank: keep to safe characters."""

CONFIGURED_SOURCES = ("override", "env")
"""Sources of devices that exist only by configuration (an override, a visibility variable's
stand-ins): they have no device file, whatever their id."""

TASKPROLOG = "the TaskProlog recipe can (accelkit env --format taskprolog)"
"""How a job's task gets the variable SLURM does not set (docs/running-at-scale.md)."""


@dataclass(frozen=True)
class _Record:
    """One ``gres.conf`` line: the devices of one family and type under one name."""

    name: str
    kind: str
    """The ``Type``; ``""``: untyped."""
    family: str
    variable: Optional[str]
    """The family's visibility variable, which a job needs set."""
    count: int
    files: Optional[str]
    """``/dev/nvidia[0-3]``; None: a count."""
    ids: tuple[str, ...]
    """The devices' ids, in the order of their files."""


def to_gres(node: Node) -> str:
    """``gres.conf`` text: comments with the ``slurm.conf`` strings, then one line per group.

    ``Name=gpu Type=h100 File=/dev/nvidia[0-7] Flags=nvidia_gpu_env`` after
    ``# slurm.conf: GresTypes=gpu`` and ``# slurm.conf: Gres=gpu:h100:8``.
    """
    by_name: dict[str, list[_Record]] = {}
    for record in _records(node):
        by_name.setdefault(record.name, []).append(record)
    if not by_name:
        return "# no accelerators on this node: no generic resources\n"
    lines: list[str] = []
    totals: dict[tuple[str, str], int] = {}
    for name, records in by_name.items():
        records, notes = _agreeing(name, records)
        lines += notes + _misnumbered(name, records)
        for record in records:
            lines += _record_lines(record)
            totals[(name, record.kind)] = totals.get((name, record.kind), 0) + record.count
    gres = [
        ":".join([name, *([kind] if kind else []), str(n)]) for (name, kind), n in totals.items()
    ]
    header = [
        f"# slurm.conf: GresTypes={','.join(by_name)}",
        f"# slurm.conf: Gres={','.join(gres)}",
    ]
    return "\n".join([*header, *lines]) + "\n"


def _records(node: Node) -> list[_Record]:
    """One record per family, resource and run of one type label in the devices' index order
    (the order SLURM must number files in: an A100 between H100s is a record of its own there)."""
    groups: dict[tuple[str, str], list[Device]] = {}
    for device in node.devices:
        groups.setdefault((device.family, device.resource_name), []).append(device)
    records = []
    for (family, resource), devices in groups.items():
        policy = node.policies.get(family)
        ordered = sorted(devices, key=lambda d: (d.index is None, d.index or 0))
        for label, run in itertools.groupby(ordered, key=lambda d: d.type_label):
            same_type = list(run)
            records.append(
                _Record(
                    name=_word(resource),
                    kind=_word(label) if label else "",
                    family=family,
                    variable=policy.visible_devices_env_var if policy else None,
                    count=len(same_type),
                    files=_files(policy.device_file if policy else None, same_type),
                    ids=tuple(d.id for d in same_type),
                )
            )
    return records


def _agreeing(name: str, records: list[_Record]) -> tuple[list[_Record], list[str]]:
    """The records of one name made to agree as slurmd requires (gres.c is fatal otherwise:
    "some records have "File" specification while others do not", the same for "Type=", and
    "duplicate records" for two with neither), and a comment line for each change made.
    Counts are one record per family and type (:func:`_counted`)."""
    notes = []
    unbound = [r for r in records if r.files is None]
    if unbound and len(unbound) < len(records):
        notes.append(
            f"# {name}: every record a count: {_described(unbound)} have no device file, and "
            f"slurmd stops when some {name} records have File= and others do not"
        )
    if unbound:
        records = _counted(records)
    untyped = [r for r in records if not r.kind]
    if untyped and len(records) > 1:
        notes.append(
            f"# {name}: {_described(untyped)} typed by family "
            f"({', '.join(f'Type={_word(r.family)}' for r in untyped)}): "
            f"slurmd stops when some {name} records have Type= and others do not"
        )
        records = [r if r.kind else dataclasses.replace(r, kind=_word(r.family)) for r in records]
    return records, notes


def _counted(records: Sequence[_Record]) -> list[_Record]:
    """The records as counts, one per family and type: a count has no place to keep, so the
    runs of one type that files had to keep apart are one record again."""
    merged: dict[tuple[str, str], _Record] = {}
    for r in records:
        first = merged.get((r.family, r.kind))
        if first is None:
            merged[(r.family, r.kind)] = dataclasses.replace(r, files=None)
        else:
            merged[(r.family, r.kind)] = dataclasses.replace(
                first, count=first.count + r.count, ids=first.ids + r.ids
            )
    return list(merged.values())


def _misnumbered(name: str, records: Sequence[_Record]) -> list[str]:
    """A comment, and a warning, where SLURM would set a job's variable to ids that are not its
    devices': SLURM writes a file's place among the records of ``name`` (0, 1, ...) into the
    variable of a record it sets one for, so each such device's id must be its place. Without
    ``ConstrainDevices``, an excluded GPU 2 puts GPU 3 in place 2, and a job given GPU 3 would
    run on GPU 2."""
    if any(r.files is None for r in records):
        return []
    placed = [(r, device_id) for r in records for device_id in r.ids]  # in SLURM's order
    ids = [device_id for _, device_id in placed]
    misplaced = [
        r.variable
        for place, (r, device_id) in enumerate(placed)
        if _slurm_flag(r) is not None and device_id != str(place)
    ]
    if not misplaced:
        return []
    message = (
        f"{name}: SLURM sets {', '.join(dict.fromkeys(map(str, misplaced)))} to a file's place "
        f"among the {name} records (0 to {len(ids) - 1}), but the devices in those places are "
        f"{','.join(ids)}: a job would run on devices it was not given, unless cgroup.conf has "
        "ConstrainDevices=yes (with TaskPlugin=task/cgroup), with which SLURM numbers each "
        "job's devices from 0 among those its cgroup lets it see"
    )
    warnings.warn(message, UserWarning, stacklevel=3)
    return [f"# {message}"]


def _described(records: Sequence[_Record]) -> str:
    """``"the a100-3g.40gb and untyped amd devices"``: the records a comment speaks of."""
    kinds = dict.fromkeys(r.kind or f"untyped {r.family}" for r in records)
    return "the " + " and ".join(kinds) + " devices"


def _record_lines(record: _Record) -> list[str]:
    """The record's line, after a comment when SLURM sets no visibility variable for it."""
    fields = [f"Name={record.name}"] + ([f"Type={record.kind}"] if record.kind else [])
    variable = record.variable or "visibility variable"
    if record.files is None:
        fields.append(f"Count={record.count}")
        return [f"# a count: SLURM sets no {variable} for jobs; {TASKPROLOG}", " ".join(fields)]
    fields.append(f"File={record.files}")
    flag = _slurm_flag(record)
    if flag is None:
        why = f"# bound to files, but SLURM sets no {variable} for jobs (only gpu variables)"
        return [f"{why}; {TASKPROLOG}", " ".join(fields)]
    return [" ".join([*fields, f"Flags={flag}"])]


def _slurm_flag(record: _Record) -> Optional[str]:
    """The ``Flags=`` that makes SLURM set the record's variable: only for ``gpu`` records, of
    the GPU vendors SLURM knows; None where it sets none."""
    return SLURM_ENV_FLAGS.get(record.variable or "") if record.name == "gpu" else None


def _word(text: str) -> str:
    """``"H100"`` -> ``"h100"``; characters SLURM would split on become ``-``."""
    return re.sub(_NOT_A_WORD, "-", text.lower())


def _files(template: Optional[str], devices: Sequence[Device]) -> Optional[str]:
    """``/dev/nvidia[4-7,0-3]`` for the devices, or None unless each has a file of its own.
    The files keep the devices' order, their index (the PCI order CUDA numbers them in with
    ``CUDA_DEVICE_ORDER=PCI_BUS_ID``), not the minors': SLURM numbers a job's
    ``CUDA_VISIBLE_DEVICES`` by a file's place in the list, and an NVIDIA GPU's minor need not
    follow its bus order (the recorded H100 node's GPU 0 is ``/dev/nvidia4``)."""
    if template is None:
        return None
    numbers = [n for n in (_file_number(template, d) for d in devices) if n is not None]
    if len(numbers) < len(devices):
        return None
    prefix, _, suffix = template.partition(f"{{{file_number_field(template)}}}")
    if len(numbers) == 1:
        return f"{prefix}{numbers[0]}{suffix}"
    return f"{prefix}[{_ranges(numbers)}]{suffix}"


def _file_number(template: str, device: Device) -> Optional[int]:
    """The number in ``device``'s file: its minor or its id, as ``template`` numbers files;
    None for a partition (its files are its parent's), a device that exists by configuration
    only, or a number not known."""
    if device.parent is not None or device.source in CONFIGURED_SOURCES:
        return None
    if file_number_field(template) == "minor":
        return device.minor
    return int(device.id) if is_index(device.id) else None


def _ranges(numbers: Sequence[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2,5"``, ``[4, 5, 0, 1]`` -> ``"4-5,0-1"``: SLURM's bracket
    notation, in the given order."""
    spans: list[list[int]] = []
    for n in numbers:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)
