"""Node snapshots: a directory that replays a machine's accelerator view without the machine.

Format (version 1)::

    DIR/snapshot.json   {"format": "accelkit-snapshot", "version": 1,
                         "env": {NAME: VALUE, ...},
                         "commands": [{"argv": [...], "returncode": 0, "stdout": "...",
                                       "stderr": ""},
                                      {"argv": [...], "error": "timeout"}, ...]}
    DIR/root/...        every file (and symlink) read, at its machine path: root/sys/...

Replaying gives a :class:`FakeHost`: files from ``root/``, the recorded variables, and each
recorded command answered for its exact argv. A command that was not recorded is "not
installed", and no vendor library is importable, so replay exercises the command and file layers.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Union

from .host import CommandSpec, FakeHost

__all__ = ["FORMAT", "VERSION", "load_snapshot"]

FORMAT = "accelkit-snapshot"
VERSION = 1
_ERRORS: dict[str, type[BaseException]] = {"timeout": TimeoutError, "missing": FileNotFoundError}


def load_snapshot(directory: Union[str, os.PathLike[str]]) -> FakeHost:
    """A host that replays the snapshot in ``directory``; ``ValueError`` says what is wrong."""
    base = Path(directory)
    manifest = base / "snapshot.json"
    try:
        data: Any = json.loads(manifest.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{base} is not a snapshot: {manifest} is missing") from None
    except ValueError as exc:
        raise ValueError(f"{manifest} is not valid JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"{manifest} is not an accelkit snapshot (no format {FORMAT!r})")
    if data.get("version") != VERSION:
        raise ValueError(
            f"{manifest} has version {data.get('version')!r}; this accelkit reads {VERSION}"
        )
    commands: dict[tuple[str, ...], CommandSpec] = {}
    for entry in data.get("commands", []):
        argv = tuple(entry["argv"])
        if "error" in entry:
            if entry["error"] not in _ERRORS:
                raise ValueError(f"{manifest}: unknown command error {entry['error']!r} for {argv}")
            commands[argv] = _ERRORS[entry["error"]](f"{argv[0]}: recorded {entry['error']}")
        else:
            commands[argv] = (
                int(entry["returncode"]),
                entry.get("stdout", ""),
                entry.get("stderr", ""),
            )
    root = base / "root"
    return FakeHost(
        root=root if root.is_dir() else None,
        env={str(k): str(v) for k, v in data.get("env", {}).items()},
        commands=commands,
    )
