"""Entry points of one group, read from the ``sys.path`` directories without ``importlib.metadata``.

Importing ``importlib.metadata`` (it brings the email parser, ``zipfile``, ``csv``, ``pathlib``
and ``socket``) costs more than a bare interpreter's whole start: 25 ms of a 60 ms ``accelkit
ls`` as soon as one vendor plugin is installed. Its reading of a plain directory of
``*.dist-info``/``*.egg-info`` folders is small, and is repeated here step for step: the
directories of ``sys.path`` in order, each one's metadata folders grouped by normalised name in
listing order, the first distribution of each name winning, and each ``entry_points.txt`` read
as ``importlib.metadata`` reads it.

The answer is given only when it is certain to be the same: every ``sys.path`` entry is a
directory (or missing), none is an egg or a zip file, ``importlib.machinery.PathFinder`` is the
one meta-path finder that lists distributions (the ``importlib_metadata`` backport, once any
library imports it, takes that over on every version), and every file read parses as it would
there.
Anything else returns None, and discovery asks ``importlib.metadata`` itself (its errors then
reach the user as before). A distribution's name and version, which only a third-party plugin's
report needs, are read from its metadata headers when first asked for.
"""

from __future__ import annotations

import functools
import importlib
import importlib.machinery
import os
import re
import sys
from typing import Optional

__all__ = ["SiteDistribution", "SiteEntryPoint", "site_entry_points"]

_INFO_SUFFIXES = (".dist-info", ".egg-info")
_ENTRY_POINT_SYNTAX = r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$"
"""``importlib.metadata.EntryPoint.pattern``: ``module``, ``module:object.attribute``, extras."""
_UNREADABLE_AS_NONE = (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)
"""The errors ``importlib.metadata`` takes for "this distribution has no such file"."""


class Uncertain(Exception):
    """This reading might differ from ``importlib.metadata``'s: ask it instead."""


class SiteDistribution:
    """One installed distribution: its metadata folder, and its name and version once read."""

    __slots__ = ("_identity", "path")

    def __init__(self, path: str) -> None:
        self.path = path
        self._identity: Optional[tuple[Optional[str], Optional[str]]] = None

    def name_and_version(self) -> tuple[Optional[str], Optional[str]]:
        """The ``Name`` and ``Version`` headers of its metadata, as ``importlib.metadata``'s
        ``dist.metadata`` gives them (read once; asked of it when the headers are unusual)."""
        if self._identity is None:
            try:
                self._identity = _name_and_version(self.path)
            except Uncertain:
                from accelkit._distributions import metadata

                fields = metadata.Distribution.at(self.path).metadata
                self._identity = (fields.get("Name"), fields.get("Version"))
        return self._identity


class SiteEntryPoint:
    """An entry point as ``importlib.metadata.EntryPoint`` describes one, loaded the same way."""

    __slots__ = ("_attributes", "_module", "dist", "group", "name", "value")

    def __init__(self, name: str, value: str, group: str, dist: SiteDistribution) -> None:
        found = re.match(_ENTRY_POINT_SYNTAX, value)
        if found is None:
            raise Uncertain  # importlib.metadata's load() fails on such a value in its own way
        self.name = name
        self.value = value
        self.group = group
        self.dist = dist
        self._module: str = found.group("module")
        self._attributes = [a for a in (found.group("attr") or "").split(".") if a]

    def load(self) -> object:
        """The module the value names, or the object its ``:attribute`` path names in it."""
        module = importlib.import_module(self._module)
        return functools.reduce(getattr, self._attributes, module)

    def __repr__(self) -> str:
        return f"SiteEntryPoint(name={self.name!r}, value={self.value!r}, group={self.group!r})"


def site_entry_points(group: str) -> Optional[list[SiteEntryPoint]]:
    """The entry points of ``group`` that ``importlib.metadata.entry_points(group=group)`` would
    list, in its order; None when this reading cannot be sure to agree with it."""
    finders = [f for f in sys.meta_path if hasattr(f, "find_distributions")]
    if finders != [importlib.machinery.PathFinder]:
        return None  # another finder (an import hook, the importlib_metadata backport's)
    points: list[SiteEntryPoint] = []
    seen: set[str] = set()
    try:
        for entry in sys.path:
            for name, info in _distributions_in(entry):
                if name not in seen:  # the first distribution of a name hides the others
                    seen.add(name)
                    points += _entry_points(info, group)
    except Uncertain:
        return None
    return points


def _distributions_in(entry: object) -> list[tuple[str, str]]:
    """The normalised name and metadata folder of each distribution in one ``sys.path`` entry,
    grouped by name in listing order as ``importlib.metadata``'s ``Lookup`` groups them."""
    if not isinstance(entry, str) or entry.lower().endswith(".egg"):
        raise Uncertain
    directory = entry or os.curdir
    if not os.path.isdir(directory):
        if os.path.exists(directory):
            raise Uncertain  # a zip file: importlib.metadata reads distributions inside it
        return []
    try:
        children = os.listdir(directory)
    except OSError:  # importlib.metadata lists nothing there either
        return []
    grouped: dict[str, list[str]] = {}
    for child in children:
        low = child.lower()
        if low.endswith(_INFO_SUFFIXES):
            key = _normalise(low.rpartition(".")[0].partition("-")[0])
            grouped.setdefault(key, []).append(child)
    return [
        (_name_from_folder(child), os.path.join(entry, child))
        for children_of_name in grouped.values()
        for child in children_of_name
    ]


def _name_from_folder(folder: str) -> str:
    """The normalised name ``importlib.metadata`` tells distributions apart by, from the folder's
    name; one whose suffix is not in lower case is named by its metadata there."""
    stem, suffix = os.path.splitext(folder)
    name = stem.partition("-")[0]
    if suffix not in _INFO_SUFFIXES or not name:
        raise Uncertain
    return _normalise(name)


def _normalise(name: str) -> str:
    """PEP 503's normalised name, with underscores (``importlib.metadata``'s ``Prepared``)."""
    return re.sub(r"[-_.]+", "-", name).lower().replace("-", "_")


def _entry_points(info: str, group: str) -> list[SiteEntryPoint]:
    """The entry points of ``group`` that one metadata folder declares."""
    text = _read(info, "entry_points.txt")
    if text is None:
        return []
    dist = SiteDistribution(info)
    return [
        SiteEntryPoint(name, value, group, dist)
        for section, name, value in _section_pairs(text)
        if section == group
    ]


def _section_pairs(text: str) -> list[tuple[str, str, str]]:
    """``(section, name, value)`` per entry, as ``importlib.metadata``'s ``Sectioned`` reads an
    ``entry_points.txt`` (a line of a section without ``=`` fails its reading: uncertain)."""
    pairs = []
    section: Optional[str] = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]")
        elif section is not None:
            name, equals, value = line.partition("=")
            if not equals:
                raise Uncertain
            pairs.append((section, name.strip(), value.strip()))
    return pairs


def _name_and_version(info: str) -> tuple[Optional[str], Optional[str]]:
    """The first ``Name`` and ``Version`` headers of ``METADATA`` (else ``PKG-INFO``), as the
    email parser behind ``dist.metadata`` reads them; anything it might read otherwise (a
    folded or unusual header, a missing file) is uncertain."""
    text = _read(info, "METADATA") or _read(info, "PKG-INFO")
    if not text or text.startswith("From "):
        raise Uncertain
    found: dict[str, str] = {}
    for line in text.split("\n"):
        if not line:
            break  # the end of the headers
        if line[0] in " \t":
            raise Uncertain  # a folded header
        key, colon, value = line.partition(":")
        if not colon or not all("!" <= c <= "~" for c in key):
            raise Uncertain  # not a header: the parser would start the body here
        found.setdefault(key.lower(), value.lstrip(" \t"))
    return (found.get("name"), found.get("version"))


def _read(info: str, filename: str) -> Optional[str]:
    """A metadata file's text (universal newlines, as ``pathlib`` reads it), None where
    ``importlib.metadata`` finds none; any other failure is uncertain."""
    try:
        with open(os.path.join(info, filename), encoding="utf-8") as handle:
            return handle.read()
    except _UNREADABLE_AS_NONE:
        return None
    except (OSError, UnicodeDecodeError) as error:
        raise Uncertain from error
