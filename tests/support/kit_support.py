"""Paths and fake distributions for the conformance kit's own tests.

The deliberately broken example plugin must never be installed next to real plugins, so tests
that need it as an installed distribution make a fake one: a ``*.dist-info`` directory on a
temporary ``sys.path`` entry, which ``importlib.metadata`` (and so accelkit's loader) reads like
any installed package.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "accelkit-example"
BROKEN = REPO / "examples" / "accelkit-broken"
GUIDE = REPO / "docs" / "plugin-authoring.md"


def write_distribution(
    directory: Path,
    name: str,
    version: str,
    entry_points: Mapping[str, Mapping[str, str]],
    requires: tuple[str, ...] = ("accelkit",),
) -> Path:
    """A minimal installed-distribution record for ``name`` under ``directory``."""
    info = directory / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    metadata = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    metadata += [f"Requires-Dist: {r}" for r in requires]
    (info / "METADATA").write_text("\n".join(metadata) + "\n")
    sections = [
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items())
        for group, entries in entry_points.items()
    ]
    (info / "entry_points.txt").write_text("\n".join(sections))
    return directory


def load_toml(text: str) -> dict[str, Any]:
    """``text`` parsed as TOML: ``tomllib`` (Python 3.11+), the ``tomli`` backport, or else the
    small subset the example pyproject.toml files use (tables, strings, lists of strings)."""
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        try:
            import tomli as tomllib
        except ImportError:
            return _load_simple_toml(text)
    parsed: dict[str, Any] = tomllib.loads(text)
    return parsed


_TABLE = re.compile(r"^\[(?P<name>[^\]]+)\]$")
_KEY = re.compile(r"^(?P<key>[\w.-]+|\"[^\"]+\")\s*=\s*(?P<value>.+)$")


def _load_simple_toml(text: str) -> dict[str, Any]:
    parsed: dict[str, Any] = {}
    table = parsed
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        header = _TABLE.match(line)
        if header:
            table = parsed
            for part in re.findall(r'"[^"]+"|[^.]+', header["name"]):
                table = table.setdefault(part.strip('"'), {})
            continue
        entry = _KEY.match(line)
        assert entry, f"kit_support cannot read this TOML line (install tomli): {raw!r}"
        value = ast.literal_eval(entry["value"].split(" #")[0].strip())
        table[entry["key"].strip('"')] = list(value) if isinstance(value, tuple) else value
    return parsed


def install_fake(pyproject: str, site: Path) -> Path:
    """Record the distribution a ``pyproject.toml`` (its text) describes under ``site``, as
    ``pip install`` would, minus the code: put the package's source directory on the path too."""
    project = load_toml(pyproject)["project"]
    return write_distribution(
        site,
        project["name"],
        project["version"],
        project.get("entry-points", {}),
        tuple(project.get("dependencies", ())),
    )
