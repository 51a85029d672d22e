"""Vendor tools whose machine-readable flag changed between releases.

``neuron-ls --json-output`` became ``--output-format json``; other tools rename their JSON flag
too. A plugin lists every spelling, newest first, and takes the first that answers: an older
tool rejects the newer flag (a non-zero exit, noted) and is asked with the older one. Reading
the records out of the JSON: :func:`accelkit.gpu_facts.json_records`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .detection import parse_json, run_command
from .host import Host

__all__ = ["first_json"]


def first_json(host: Host, *commands: Sequence[str]) -> Any:
    """The parsed output of the first command that exits 0 with valid JSON, else None.

    Each command that is missing, fails, hangs or prints something that is not JSON is noted.
    """
    for argv in commands:
        data = parse_json(run_command(host, argv), f"`{' '.join(argv)}` output")
        if data is not None:
            return data
    return None
