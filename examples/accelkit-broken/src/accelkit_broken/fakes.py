"""Fake hosts for the broken plugin (its backdoor, group ``accelkit.testing``): this part works,
so that ``accelkit check broken`` runs every check and shows every broken rule."""

from __future__ import annotations

from pathlib import Path

from accelkit import FakeHost


def make_host(count: int, root: Path) -> FakeHost:
    """A host with ``count`` broken cards (``/dev/brk<N>``) and its ``brk-smi`` tool."""
    (root / "dev").mkdir()
    for number in range(count):
        (root / "dev" / f"brk{number}").write_text("")
    return FakeHost(root=root, commands={"brk-smi": (0, "brk-smi 1.0\n")})
