"""Paths and fake distributions for the conformance kit's own tests.

The deliberately broken example plugin must never be installed next to real plugins, so tests
that need it as an installed distribution make a fake one: a ``*.dist-info`` directory on a
temporary ``sys.path`` entry, which ``importlib.metadata`` (and so accelkit's loader) reads like
any installed package.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

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
