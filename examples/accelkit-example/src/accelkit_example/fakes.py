"""Fake ACME hosts, for tests and for ``accelkit check acme`` (group ``accelkit.testing``)."""

from __future__ import annotations

from pathlib import Path

from accelkit import FakeHost

MODEL = "ACME Rocket X1"


def make_host(count: int, root: Path) -> FakeHost:
    """A host with ``count`` ACME cards, its files written under ``root`` (an empty directory)."""
    for number in range(count):
        (root / "dev").mkdir(exist_ok=True)
        (root / "dev" / f"acme{number}").write_text("")
        sysfs = root / "sys" / "class" / "acme" / f"acme{number}"
        sysfs.mkdir(parents=True)
        (sysfs / "model").write_text(MODEL + "\n")
    return FakeHost(root=root)
