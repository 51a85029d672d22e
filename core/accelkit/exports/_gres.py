"""SLURM ``gres.conf`` lines for this node, and the ``slurm.conf`` strings to match.

One line per family and device type: ``Name`` is the resource in lowercase (``gpu``, ``npu``,
``neuron_cores``), ``Type`` the type label in lowercase. Where the family declares its devices'
files (``Scheduling.device_file``) and every id names one, the line binds them
(``File=/dev/nvidia[0-7]``) and SLURM can tell jobs which devices they got; otherwise it gives a
``Count``. SLURM sets a visibility variable only for devices bound to their files, of the GPU
vendors its ``Flags`` name; a count gets none, and a comment above its line says so (a TaskProlog
sets it: docs/running-at-scale.md). AMD and Intel GPUs are counts too: their files are DRM render
nodes (``/dev/dri/renderD128``...), which a node record does not map to the ids ROCr and Level
Zero use (and a Max 1550 is two Level Zero devices on one render node).

The comment lines on top give ``slurm.conf``'s two strings: ``GresTypes=`` (cluster-wide; SLURM
manages no generic resource it does not name) and ``Gres=`` (this node's ``NodeName`` line).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Optional

from accelkit._visibility import is_index

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


def to_gres(node: Node) -> str:
    """``gres.conf`` text: comments with the ``slurm.conf`` strings, then one line per group.

    ``Name=gpu Type=h100 File=/dev/nvidia[0-7] Flags=nvidia_gpu_env`` after
    ``# slurm.conf: GresTypes=gpu`` and ``# slurm.conf: Gres=gpu:h100:8``.
    """
    groups: dict[tuple[str, str, Optional[str]], list[Device]] = {}
    for device in node.devices:
        key = (device.family, device.resource_name, device.type_label)
        groups.setdefault(key, []).append(device)
    lines: list[str] = []
    totals: list[str] = []
    for (family, resource, label), devices in groups.items():
        name = _word(resource)
        kind = _word(label) if label else ""
        fields = [f"Name={name}"] + ([f"Type={kind}"] if kind else [])
        policy = node.policies.get(family)
        files = _files(policy.device_file if policy else None, devices)
        variable = policy.visible_devices_env_var if policy else None
        if files is None:
            fields.append(f"Count={len(devices)}")
            lines.append(
                f"# a count: SLURM sets no {variable or 'visibility variable'} for jobs; a "
                "TaskProlog can (accelkit env)"
            )
        else:
            fields.append(f"File={files}")
            flag = SLURM_ENV_FLAGS.get(variable or "")
            if flag is not None and name == "gpu":
                fields.append(f"Flags={flag}")
        lines.append(" ".join(fields))
        totals.append(":".join([name, *([kind] if kind else []), str(len(devices))]))
    if not lines:
        return "# no accelerators on this node: no generic resources\n"
    names = dict.fromkeys(total.partition(":")[0] for total in totals)
    header = [
        f"# slurm.conf: GresTypes={','.join(names)}",
        f"# slurm.conf: Gres={','.join(totals)}",
    ]
    return "\n".join([*header, *lines]) + "\n"


def _word(text: str) -> str:
    """``"H100"`` -> ``"h100"``; characters SLURM would split on become ``-``."""
    return re.sub(_NOT_A_WORD, "-", text.lower())


def _files(template: Optional[str], devices: Sequence[Device]) -> Optional[str]:
    """``/dev/nvidia[0-3,6]`` for the devices, or None when their ids do not name files."""
    if template is None or any(d.parent is not None or not is_index(d.id) for d in devices):
        return None
    prefix, _, suffix = template.partition("{id}")
    numbers = sorted(int(d.id) for d in devices)
    if len(numbers) == 1:
        return f"{prefix}{numbers[0]}{suffix}"
    return f"{prefix}[{_ranges(numbers)}]{suffix}"


def _ranges(numbers: Sequence[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2,5"``: SLURM's bracket notation."""
    spans: list[list[int]] = []
    for n in numbers:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)
