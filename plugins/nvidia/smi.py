"""nvidia-smi's CSV queries, and the GPUs nvidia-smi names but cannot reach.

nvidia-smi exits 15 when a GPU "has fallen off the bus or has otherwise become inaccessible"
(nvidia-smi(1), RETURN VALUE). It still prints the rows of the GPUs it reaches, with a line for
each one it does not among them, as users report it: ``Unable to determine the device handle
for GPU0000:3A:00.0: Unknown Error``. Such a GPU is NVML's ``NVML_ERROR_GPU_IS_LOST`` or
``NVML_ERROR_UNKNOWN`` handle, which the NVML layer leaves out (``nvml.opened``): CUDA still
counts it, so the healthy rows keep their ``index``, CUDA's number (with
``CUDA_DEVICE_ORDER=PCI_BUS_ID``). So the layer answers with those rows and leaves the named GPU
out, with a warning; any other non-zero exit, or an exit 15 whose output names no GPU, fails the
layer as before, and the next one answers.

Unverified (no such node was at hand): the exact wording of that line beyond the reports (a space
after ``GPU``, a 4- or 8-digit domain and the error text after the colon are all read), whether
nvidia-smi prints it on stdout or stderr (both are read), and that every query exits 15 with it
(a GPU answering ``Unknown Error`` may make nvidia-smi exit with another status: that stays a
failure).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Optional

from accelkit import CommandResult, Host, note
from accelkit.detect import normalise_bus_id, parse_csv, run_command

__all__ = ["GPU_LOST_STATUS", "UNREACHABLE", "reachable", "smi_rows", "unreachable"]

GPU_LOST_STATUS = 15
"""nvidia-smi's exit status for a GPU fallen off the bus or otherwise inaccessible."""
UNREACHABLE = (
    r"(?i)^\s*unable to determine the device handle for gpu\s*"
    r"(?P<bus>(?:[0-9a-f]{4,8}:)?[0-9a-f]{2}:[0-9a-f]{2}\.[0-7])\s*:\s*(?P<why>.*?)\s*$"
)
"""A line naming a GPU nvidia-smi cannot reach (its bus id, then why): a pattern, compiled on
first use rather than at every start."""
WHAT = "nvidia-smi output"


def unreachable(result: CommandResult) -> dict[str, str]:
    """Bus id (sysfs's spelling) -> nvidia-smi's line, for each GPU ``result`` says it cannot
    reach (on stdout or stderr)."""
    found = {}
    for line in f"{result.stdout}\n{result.stderr}".splitlines():
        named = re.match(UNREACHABLE, line)
        bus = None if named is None else normalise_bus_id(named["bus"])
        if bus is not None:
            found[bus] = line.strip()
    return found


def reachable(result: CommandResult) -> Optional[str]:
    """The rows nvidia-smi printed for the GPUs it reached: its output, without the lines naming
    GPUs it could not reach, when it exits 0, or 15 with such lines; else None."""
    if result.returncode not in (0, GPU_LOST_STATUS):
        return None
    if result.returncode == GPU_LOST_STATUS and not unreachable(result):
        return None
    return "\n".join(x for x in result.stdout.splitlines() if not re.match(UNREACHABLE, x))


def smi_rows(host: Host, argv: Sequence[str], fields: int, bus: int) -> Optional[list[list[str]]]:
    """The rows of ``fields`` cells of nvidia-smi's query ``argv`` (as ``parse_csv`` gives
    them), without the GPUs it cannot reach (cell ``bus`` holds each row's bus id), each left out
    with a warning; None when the query fails."""
    lost: dict[str, str] = {}

    def some_gpus_lost(result: CommandResult) -> Optional[str]:
        """Exit status 15 naming the GPUs it cannot reach: the rows of those it can."""
        if result.returncode != GPU_LOST_STATUS:
            return None
        lost.update(unreachable(result))
        return reachable(result) if lost else None

    text = run_command(host, argv, partial=some_gpus_lost)
    for where, line in lost.items():
        note(
            f"GPU {where} is left out: nvidia-smi cannot reach it ({line!r}, exit status "
            f"{GPU_LOST_STATUS}: fallen off the bus or otherwise inaccessible); look for an Xid "
            "in the kernel log. The GPUs after it keep their numbers, as in CUDA's",
            "warning",
        )
    rows = parse_csv(text, fields, WHAT)
    if rows is None:
        return None
    return [row for row in rows if normalise_bus_id(row[bus]) not in lost]
