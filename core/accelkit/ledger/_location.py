"""Where a process's ledger lives: the grant it runs on, the operator's choice, or the per-user
default; and the rules every ledger path follows (absolute, naming a file)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Optional, Union

from accelkit.errors import LedgerError

if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "GRANT_VAR",
    "LEDGER_VAR",
    "absolute",
    "default_location",
    "default_path",
    "grant_named",
    "location_of",
    "temp_directory",
]

LEDGER_VAR = "ACCELKIT_LEDGER"
"""A ledger path every accelkit on this node uses instead of the per-user default (a group's)."""

GRANT_VAR = "ACCELKIT_GRANT"
"""``<token>@<ledger path>``: set in the environment of every process that runs on a grant
(``accelkit run``'s command, a pool's worker), so that accelkit in it takes steps of that grant
from that ledger (:mod:`accelkit.ledger._identity`)."""


def default_path() -> tuple[Path, bool]:
    """The ledger ``path=None`` means, and whether it is the per-user one: the ledger of the
    grant this process runs on (``$ACCELKIT_GRANT``: its steps come from there), else
    ``$ACCELKIT_LEDGER`` (a group's, used as given), else ``$XDG_RUNTIME_DIR/accelkit/ledger.json``,
    else ``<temp dir>/accelkit-<uid>/ledger.json``. The pool and ``accelkit run`` share it.
    A relative path, or one naming a directory, is a :class:`~accelkit.LedgerError`."""
    from pathlib import Path

    location, per_user = default_location()
    return Path(location), per_user


def location_of(path: Optional[Union[str, os.PathLike[str]]]) -> tuple[str, bool]:
    """The ledger ``Ledger(path)`` uses, as text, and whether it is the per-user one:
    :func:`default_location` for None, else ``path`` as :func:`absolute` allows it."""
    if path is None:
        return default_location()
    text = os.fspath(path)
    return absolute(text, f"the ledger path {text!r}"), False


def default_location() -> tuple[str, bool]:
    """:func:`default_path` as text. The ledger keeps its paths as text: ``pathlib`` (with
    ``urllib.parse`` and ``ipaddress``) would cost every ``accelkit run`` and ``env`` 2.5 ms of
    start-up for joining three names."""
    enclosing = os.environ.get(GRANT_VAR, "").strip()
    if enclosing:
        return grant_named(enclosing)[1], False
    chosen = os.environ.get(LEDGER_VAR, "").strip()
    if chosen:
        return absolute(chosen, f"{LEDGER_VAR}={chosen!r}"), False
    runtime = os.environ.get("XDG_RUNTIME_DIR", "").strip()
    if runtime and os.path.isdir(runtime):
        return os.path.join(runtime, "accelkit", "ledger.json"), True
    return os.path.join(temp_directory(), f"accelkit-{os.getuid()}", "ledger.json"), True


def temp_directory() -> str:
    """The directory ``tempfile.gettempdir()`` names: the first of ``$TMPDIR``, ``$TEMP``,
    ``$TMP``, ``/tmp``, ``/var/tmp`` and ``/usr/tmp`` this process may write in. Importing
    :mod:`tempfile` for it (with ``random``, ``hashlib`` and ``shutil``) would cost every
    ``accelkit run`` about 3 ms of start-up."""
    named = (os.environ.get(name, "") for name in ("TMPDIR", "TEMP", "TMP"))
    for candidate in (*named, "/tmp", "/var/tmp", "/usr/tmp"):
        if candidate and os.path.isdir(candidate) and os.access(candidate, os.W_OK | os.X_OK):
            return os.path.abspath(candidate)
    return os.getcwd()


def grant_named(value: str) -> tuple[int, str]:
    """``"<token>@<ledger path>"`` (the value of ``ACCELKIT_GRANT``) as (token, ledger path)."""
    token, at, path = value.partition("@")
    if not (token.isdigit() and at and os.path.isabs(path) and not _names_a_directory(path)):
        raise LedgerError(
            f"{GRANT_VAR}={value!r} is not <token>@<absolute ledger path>, as accelkit writes it "
            "for the processes of a grant; unset it to take from the node itself"
        )
    return int(token), path


def absolute(path: str, source: str) -> str:
    """``path`` as the ledger's path; a relative one is refused, ``source`` saying where it came
    from: it would name another ledger in every working directory, and the processes of one
    node must meet in one file. So is one that names a directory (a trailing ``/`` where no
    directory is: the file's path without it is meant), anything but a regular file, or lies
    under a file: no ledger can be kept there (``/dev/null`` read as a corrupt ledger)."""
    if not path.strip():  # an unset variable's, as often as not
        raise LedgerError(
            f"{source} is empty: give the absolute path of the ledger's file, or none (no "
            "--ledger, path=None) for the default ledger"
        )
    if not os.path.isabs(path):
        raise LedgerError(
            f"{source} is a relative path, which would give every working directory its own "
            f"ledger; give an absolute path (e.g. {os.path.abspath(path)})"
        )
    bare = path.rstrip("/")
    if path.endswith("/") and bare and not os.path.exists(bare) and not _names_a_directory(bare):
        raise LedgerError(
            f"{source} ends with '/', which names a directory, and there is none at {bare}: "
            f"the ledger is a file; give its path without the '/' ({bare})"
        )
    above = _nearest_existing(os.path.dirname(path))
    if not os.path.isdir(above):
        raise LedgerError(
            f"{source} lies under {above}, which is a file, not a directory: no ledger can be "
            "made there; give the path of a file in a directory"
        )
    if _names_a_directory(path) or os.path.isdir(path):
        raise LedgerError(
            f"{source} names a directory, not the ledger's file; give the file's path (e.g. "
            f"{os.path.join(path, 'ledger.json')})"
        )
    if os.path.exists(path) and not os.path.isfile(path):
        raise LedgerError(
            f"{source} names no regular file (a device, a pipe or a socket), which cannot be "
            "a ledger: give the path of a file, or of one to make"
        )
    return path


def _nearest_existing(directory: str) -> str:
    """``directory``, or the nearest path above it that exists (``/`` at last)."""
    while not os.path.exists(directory) and os.path.dirname(directory) != directory:
        directory = os.path.dirname(directory)
    return directory


def _names_a_directory(path: str) -> bool:
    """``/srv/ledgers/``, ``/srv/.``: no file's path (the lock would be ``/srv/..lock``)."""
    return os.path.basename(path) in ("", ".", "..")
