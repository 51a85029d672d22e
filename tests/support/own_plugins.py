"""The plugins this repository ships, and the ones the machine running the suite happens to have.

The suite runs in whatever environment it is installed in, beside any accelkit plugin that
environment holds: a vendor's, or one whose import raises (an ``error`` diagnostic of every node
detected, a warning line of every verb, exit status 1 of ``accelkit plugins``). A test about the
built-ins, the example plugin, the contrib plugins or the plugins it installs itself must hold
whatever else is installed. In this process it builds a registry of what it is about
(``Registry(autoload=False)``, ``Registry(entry_points=...)``) or looks at its own family's
diagnostics; a process it starts gets :func:`ours_only` of its environment (or, when it inherits
this one's, the ``only_our_plugins`` fixture of tests/conftest.py), which blocks each
:data:`FOREIGN_PLUGINS` by name with ``ACCELKIT_DISABLE_PLUGINS``: such a process loads what it
would on a machine without them, and lists them as ``disabled``.

A foreign plugin named like a built-in or an installed plugin of ours is left alone: blocking it
by name would block ours too. (One named like a plugin a test installs itself, ``broken`` of
examples/accelkit-broken, is blocked: a test that installs a plugin of that name does not use
:func:`ours_only`.)
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from pathlib import Path

from accelkit.hookspecs import ENTRY_POINT_GROUP
from accelkit.registry import BUILTIN_PLUGINS, DISABLE_VAR

if sys.version_info >= (3, 10):
    from importlib import metadata
else:
    import importlib_metadata as metadata

REPO = Path(__file__).resolve().parents[2]

__all__ = ["FOREIGN_PLUGINS", "OUR_DISTRIBUTIONS", "ours_only"]


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _our_distributions() -> frozenset[str]:
    """The distributions built from this repository: accelkit, the examples and the contrib
    plugins (the ``name`` of each ``pyproject.toml``'s ``[project]`` table)."""
    found = set()
    for pyproject in [
        REPO / "pyproject.toml",
        *REPO.glob("examples/*/pyproject.toml"),
        *REPO.glob("contrib/*/pyproject.toml"),
    ]:
        project = re.search(
            r"^\[project\]\n(?:[^\[].*\n|\n)*?name = \"([^\"]+)\"", pyproject.read_text(), re.M
        )
        if project:
            found.add(_normalized(project[1]))
    return frozenset(found)


OUR_DISTRIBUTIONS = _our_distributions()
"""Normalized names of the distributions this repository ships."""


def _foreign_plugins() -> tuple[str, ...]:
    ours: set[str] = {module.rpartition(".")[2] for module in BUILTIN_PLUGINS}
    theirs: set[str] = set()
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(ep, "dist", None)
        name = None if dist is None else dist.metadata["Name"]
        (ours if name and _normalized(name) in OUR_DISTRIBUTIONS else theirs).add(ep.name)
    return tuple(sorted(theirs - ours))


FOREIGN_PLUGINS = _foreign_plugins()
"""The names of the installed ``accelkit`` entry points of distributions not of this repository,
read once, when tests/conftest.py imports this module: before any test puts a fake distribution
of its own on ``sys.path``."""


def ours_only(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` for a process that loads no foreign plugin: ``ACCELKIT_DISABLE_PLUGINS`` names
    each of :data:`FOREIGN_PLUGINS` beside the plugins ``env`` blocks already."""
    environ = dict(env)
    if FOREIGN_PLUGINS:
        blocked = [n.strip() for n in environ.get(DISABLE_VAR, "").split(",") if n.strip()]
        environ[DISABLE_VAR] = ",".join([*blocked, *FOREIGN_PLUGINS])
    return environ
