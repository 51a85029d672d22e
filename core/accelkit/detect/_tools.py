"""Vendor tools whose machine-readable flag changed between releases.

``neuron-ls --json-output`` became ``--output-format json``; other tools rename their JSON flag
too. A plugin lists every spelling, newest first, and takes the first that answers: an older
tool rejects the newer flag (a non-zero exit, noted) and is asked with the older one.
:func:`first_records` also reads the per-device records out of the JSON, wherever the tool's
release puts them (:func:`accelkit.gpu_facts.json_records`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

from accelkit.detect._facts import json_records
from accelkit.detect._layers import parse_json, run_command
from accelkit.diagnostics import Level, note
from accelkit.host import Host, ProbeEnv

__all__ = ["first_json", "first_records"]


def first_json(host: Host, *commands: Sequence[str], env: Optional[ProbeEnv] = None) -> Any:
    """The parsed output of the first command that exits 0 with valid JSON, else None.

    Each command that is missing, fails, hangs or prints something that is not JSON is noted; a
    spelling that exits non-zero while another is left to ask is only information (an older
    tool rejecting a newer flag is expected), the last one's failure is a warning. Each runs
    with ``env`` (see :func:`run_command`).
    """
    for number, argv in enumerate(commands, 1):
        failing: Level = "warning" if number == len(commands) else "info"
        text = run_command(host, argv, failing=failing, env=env)
        data = parse_json(text, f"`{' '.join(argv)}` output")
        if data is not None:
            return data
    return None


def first_records(
    host: Host, *commands: Sequence[str], env: Optional[ProbeEnv] = None
) -> Optional[list[Mapping[str, Any]]]:
    """The per-device records of the first command that answers with JSON, else None.

    A top-level list, or the first list of objects under a top-level key (``{"device_list":
    [...]}``); JSON holding no such list is noted and gives None, so the next layer is asked.
    Each command runs with ``env`` (see :func:`run_command`).
    """
    data = first_json(host, *commands, env=env)
    records = json_records(data)
    if records is None and data is not None:
        note(f"{commands[0][0]} printed JSON without a list of devices; ignoring it", "warning")
    return records
