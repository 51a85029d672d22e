"""Whether any installed distribution can add a plugin, found without ``importlib.metadata``.

Importing ``importlib.metadata`` (it brings the email parser, zipfile, csv and socket) costs more
than a bare interpreter's whole start, and on most machines the only distribution declaring
group ``accelkit`` is accelkit itself, whose entry points are the built-ins. So discovery first
reads the ``entry_points.txt`` of each ``*.dist-info``/``*.egg-info`` directory on ``sys.path``,
as ``importlib.metadata`` would, and asks it only when another entry point might exist.

The answer is "none" only when it is certain: every ``sys.path`` entry is a directory (or
missing), no entry is an egg or a zip file, ``importlib.machinery.PathFinder`` is the only
meta-path finder that lists distributions, and every file read parses. Anything else sends
discovery to ``importlib.metadata``.
"""

from __future__ import annotations

import importlib.machinery
import os
import sys
from collections.abc import Iterable

__all__ = ["only_builtin_entry_points"]

_INFO_SUFFIXES = (".dist-info", ".egg-info")
_UNREADABLE = "<unreadable entry_points.txt>"
"""What an unreadable file declares: a module that is never a built-in."""


def only_builtin_entry_points(group: str, builtins: Iterable[str]) -> bool:
    """True when no distribution on ``sys.path`` declares an entry point of ``group`` whose
    module is not one of ``builtins``; False when one does or when that cannot be told here."""
    finders = [f for f in sys.meta_path if hasattr(f, "find_distributions")]
    if any(finder is not importlib.machinery.PathFinder for finder in finders):
        return False  # another finder (the importlib_metadata backport's, an import hook)
    modules = frozenset(builtins)
    for entry in sys.path:
        directory = entry or os.curdir
        if directory.lower().endswith(".egg"):
            return False
        if not os.path.isdir(directory):
            if os.path.exists(directory):
                return False  # a zip file: importlib.metadata reads distributions inside it
            continue
        if not all(modules.issuperset(_declared(path, group)) for path in _info_dirs(directory)):
            return False
    return True


def _info_dirs(directory: str) -> list[str]:
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return [os.path.join(directory, n) for n in names if n.lower().endswith(_INFO_SUFFIXES)]


def _declared(info: str, group: str) -> set[str]:
    """The modules of the ``group`` entry points an info directory declares; an unreadable
    file declares a module no set of built-ins holds."""
    path = os.path.join(info, "entry_points.txt")
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (FileNotFoundError, NotADirectoryError):  # no entry points, or a distutils file
        return set()
    except (OSError, UnicodeDecodeError):
        return {_UNREADABLE}
    modules: set[str] = set()
    section = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
        elif section == group:
            modules.add(line.partition("=")[2].partition(":")[0].strip())
    return modules
