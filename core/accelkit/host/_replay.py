"""Node snapshots replayed: a directory that stands in for a machine's accelerator view.

Replaying a recorded host is the host stage's job, so ``accelkit ls --host DIR`` and every test
built on a recorded node need nothing above it; recording runs node detection and lives with it,
in :mod:`accelkit.node._snapshot`, which writes the format read here.

Format (version 1)::

    DIR/snapshot.json   {"format": "accelkit-snapshot", "version": 1,
                         "env": {NAME: VALUE, ...},
                         "commands": [{"argv": [...], "returncode": 0, "stdout": "...",
                                       "stderr": ""},
                                      {"argv": [...], "error": "timeout"}, ...],
                         "recorded_by": "accelkit 0.1.0", "redacted": false}
    DIR/root/...        every file (and symlink) read, at its machine path: root/sys/...

``env`` holds only the variables the managers declare (``env_vars_read``) and the operator's
``ACCELKIT_OVERRIDE_RESOURCES`` / ``ACCELKIT_EXCLUDE_DEVICES``. A command's ``error`` is
``"timeout"`` (replayed as ``TimeoutError``), ``"missing"`` (``FileNotFoundError``: not installed)
or ``"failed"`` (another ``OSError``); an optional ``"message"`` is the exception's text.
``recorded_by`` and ``redacted`` are informational and optional. Under ``root/``, a file that was
only looked at (listed, globbed, tested for existence) is an empty placeholder, and a file that
existed but could not be read as text holds a single NUL byte, so it replays as unreadable too.

Replaying gives a :class:`FakeHost`: files from ``root/``, the recorded variables, and each
recorded command answered for its exact argv. A command that was not recorded is "not
installed", and no vendor library is importable, so replay exercises the command and file layers.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any, Optional, Union

from accelkit._json import check_keys
from accelkit._shown import shown
from accelkit.errors import InvalidData
from accelkit.host._fake import CommandSpec, FakeHost

__all__ = ["FORMAT", "MANIFEST", "ROOT", "VERSION", "load_snapshot"]

FORMAT = "accelkit-snapshot"
VERSION = 1
MANIFEST = "snapshot.json"
ROOT = "root"
_ERRORS: dict[str, type[BaseException]] = {
    "timeout": TimeoutError,
    "missing": FileNotFoundError,
    "failed": OSError,
}


def load_snapshot(
    directory: Union[str, os.PathLike[str]], *, env: Optional[Mapping[str, str]] = None
) -> FakeHost:
    """A host that replays the snapshot in ``directory``; :class:`~accelkit.InvalidData` (a
    ``ValueError``) says what is wrong with anything else, whatever the manifest holds.

    ``env`` holds variables that replace the recorded ones (``accelkit --host`` passes the
    shell's operator and visibility variables)."""
    # os.path, not pathlib: pathlib brings urllib.parse and ipaddress, about 3 ms of every
    # command run with --host.
    base = os.fspath(directory)
    manifest = os.path.join(base, MANIFEST)
    try:
        with open(manifest, encoding="utf-8") as file:
            data: Any = json.loads(file.read())
    except FileNotFoundError:
        raise InvalidData(
            f"{base} is not a snapshot: {manifest} is missing (record one with `accelkit "
            "snapshot DIR`, or from a fake host with accelkit.node.record_snapshot(DIR, host))"
        ) from None
    except OSError as exc:
        raise InvalidData(f"{manifest} cannot be read: {exc.strerror or exc}") from None
    except (ValueError, RecursionError) as exc:  # RecursionError: nested beyond any use
        raise InvalidData(f"{manifest} is not valid JSON: {shown(str(exc), 200)}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise InvalidData(f"{manifest} is not an accelkit snapshot (no format {FORMAT!r})")
    if data.get("version") != VERSION:
        raise InvalidData(
            f"{manifest} has version {shown(data.get('version'))}; this accelkit reads {VERSION}"
        )
    check_keys(data, _MANIFEST_KEYS, f"{manifest}", required=("format", "version"))
    recorded = data.get("env", {})
    if not isinstance(recorded, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in recorded.items()
    ):
        raise InvalidData(f"{manifest}: env must be an object of variable names to strings")
    entries = data.get("commands", [])
    if not isinstance(entries, list):
        raise InvalidData(f"{manifest}: commands must be a list")
    commands: dict[Union[str, tuple[str, ...]], CommandSpec] = {}
    for entry in entries:
        commands.update(_command(manifest, entry))
    root = os.path.join(base, ROOT)
    return FakeHost(
        root=root if os.path.isdir(root) else None,
        env={**recorded, **(env or {})},
        commands=commands,
    )


_MANIFEST_KEYS = ("format", "version", "env", "commands", "recorded_by", "redacted")
_COMMAND_KEYS = ("argv", "returncode", "stdout", "stderr", "error", "message")


def _command(manifest: str, entry: object) -> dict[Union[str, tuple[str, ...]], CommandSpec]:
    """One recorded command: its argv and what replaying it gives; ``InvalidData`` if malformed."""
    checked = check_keys(entry, _COMMAND_KEYS, f"{manifest}: a command", required=("argv",))
    argv = checked["argv"]
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise InvalidData(
            f"{manifest}: a command's argv must be a list of strings, got {shown(argv)}"
        )
    key = tuple(argv)
    if "error" in checked:
        error = checked["error"]
        if not isinstance(error, str) or error not in _ERRORS:
            raise InvalidData(
                f"{manifest}: unknown command error {shown(error)} for {shown(key)}; known: "
                f"{sorted(_ERRORS)}"
            )
        message = checked.get("message") or f"{argv[0]}: recorded {error}"
        return {key: _ERRORS[error](str(message))}
    code, out, err = checked.get("returncode"), checked.get("stdout", ""), checked.get("stderr", "")
    if isinstance(code, bool) or not isinstance(code, int):
        raise InvalidData(f"{manifest}: {key} needs a whole-number returncode, got {shown(code)}")
    if not isinstance(out, str) or not isinstance(err, str):
        raise InvalidData(f"{manifest}: {key}'s stdout and stderr must be strings")
    return {key: (code, out, err)}
