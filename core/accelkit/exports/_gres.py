"""SLURM ``gres.conf`` lines for this node, and the ``slurm.conf`` strings to match.

One line per family and device type: ``Name`` is the resource in lowercase (``gpu``, ``npu``,
``neuron_cores``), ``Type`` the type label in lowercase. Where the family declares its devices'
files (``Scheduling.device_file``) and every device of the line has one, the line binds them
(``File=/dev/nvidia[4-7,0-3]``, in the devices' PCI order) and SLURM can tell jobs which devices
they got; otherwise it gives a ``Count``. A device's file is numbered by its id or by its ``minor``,
as the family's template says (an NVIDIA GPU's minor is not its index: ``/dev/nvidia{minor}``); a
partition, a device made by an override or a visibility variable, or one whose minor detection did
not read has no file: SLURM stats every file it is given and stops when one is missing, and its
cgroup would give a job a file that is another device. SLURM sets a visibility variable only for
``gpu`` devices bound to their files, of the GPU vendors its ``Flags`` name; for every other line a
comment above it says so (a TaskProlog sets it: docs/running-at-scale.md). AMD and Intel GPUs are
counts too: their files are DRM render nodes (``/dev/dri/renderD128``...), which a node record does
not map to the ids ROCr and Level Zero use (and a Max 1550 is two Level Zero devices on one render
node).

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
import re
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
    totals: list[str] = []
    for name, records in by_name.items():
        records, notes = _agreeing(name, records)
        lines += notes
        for record in records:
            lines += _record_lines(record)
            totals.append(
                ":".join([name, *([record.kind] if record.kind else []), str(record.count)])
            )
    header = [
        f"# slurm.conf: GresTypes={','.join(by_name)}",
        f"# slurm.conf: Gres={','.join(totals)}",
    ]
    return "\n".join([*header, *lines]) + "\n"


def _records(node: Node) -> list[_Record]:
    """One record per family, resource and type label, as each family's devices give it."""
    groups: dict[tuple[str, str, Optional[str]], list[Device]] = {}
    for device in node.devices:
        key = (device.family, device.resource_name, device.type_label)
        groups.setdefault(key, []).append(device)
    records = []
    for (family, resource, label), devices in groups.items():
        policy = node.policies.get(family)
        records.append(
            _Record(
                name=_word(resource),
                kind=_word(label) if label else "",
                family=family,
                variable=policy.visible_devices_env_var if policy else None,
                count=len(devices),
                files=_files(policy.device_file if policy else None, devices),
            )
        )
    return records


def _agreeing(name: str, records: list[_Record]) -> tuple[list[_Record], list[str]]:
    """The records of one name made to agree as slurmd requires (gres.c is fatal otherwise:
    "some records have "File" specification while others do not", the same for "Type=", and
    "duplicate records" for two with neither), and a comment line for each change made."""
    notes = []
    unbound = [r for r in records if r.files is None]
    if unbound and len(unbound) < len(records):
        notes.append(
            f"# {name}: every record a count: {_described(unbound)} have no device file, and "
            f"slurmd stops when some {name} records have File= and others do not"
        )
        records = [dataclasses.replace(r, files=None) for r in records]
    untyped = [r for r in records if not r.kind]
    if untyped and len(records) > 1:
        notes.append(
            f"# {name}: {_described(untyped)} typed by family "
            f"({', '.join(f'Type={_word(r.family)}' for r in untyped)}): "
            f"slurmd stops when some {name} records have Type= and others do not"
        )
        records = [r if r.kind else dataclasses.replace(r, kind=_word(r.family)) for r in records]
    return records, notes


def _described(records: Sequence[_Record]) -> str:
    """``"the a100-3g.40gb and untyped amd devices"``: the records a comment speaks of."""
    return "the " + " and ".join(r.kind or f"untyped {r.family}" for r in records) + " devices"


def _record_lines(record: _Record) -> list[str]:
    """The record's line, after a comment when SLURM sets no visibility variable for it."""
    fields = [f"Name={record.name}"] + ([f"Type={record.kind}"] if record.kind else [])
    variable = record.variable or "visibility variable"
    if record.files is None:
        fields.append(f"Count={record.count}")
        return [f"# a count: SLURM sets no {variable} for jobs; {TASKPROLOG}", " ".join(fields)]
    fields.append(f"File={record.files}")
    flag = SLURM_ENV_FLAGS.get(record.variable or "")
    if flag is None or record.name != "gpu":
        why = f"# bound to files, but SLURM sets no {variable} for jobs (only gpu variables)"
        return [f"{why}; {TASKPROLOG}", " ".join(fields)]
    return [" ".join([*fields, f"Flags={flag}"])]


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
    ordered = sorted(devices, key=lambda d: (d.index is None, d.index or 0))
    numbers = [n for n in (_file_number(template, d) for d in ordered) if n is not None]
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
