"""Fake distributions for hermetic discovery tests (as pytest's own loader tests do)."""

from __future__ import annotations

import importlib
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from accelkit import registry

if sys.version_info >= (3, 10):
    from importlib import metadata
else:
    import importlib_metadata as metadata

PLUGIN_VARS = (
    registry.DISABLE_VAR,
    registry.AUTOLOAD_OFF_VAR,
    registry.REQUIRE_VAR,
    registry.TRACE_VAR,
)

MANAGER_SOURCE = """
from accelkit import AcceleratorManager, hookimpl

class Manager(AcceleratorManager):
    name = {family!r}
    resource_name = {resource!r}
    replaces = {replaces!r}

    def detect(self, host):
        return []

@hookimpl
def accelkit_register_managers():
    return [Manager()]
"""


def manager_module(family: str, resource: str = "WIDGET", replaces: str | None = None) -> str:
    """Source of a valid plugin module providing one manager of ``family``."""
    return MANAGER_SOURCE.format(family=family, resource=resource, replaces=replaces)


class FakeSite:
    """A directory on ``sys.path`` holding fake distributions (``.dist-info``) and their modules."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def add(
        self,
        dist: str,
        entry_points: Mapping[str, str],
        modules: Mapping[str, str] | None = None,
        version: str = "1.0",
    ) -> None:
        """Install distribution ``dist`` with ``entry_points`` (group accelkit) and ``modules``."""
        info = self.path / f"{dist.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
        lines = [f"{name} = {value}" for name, value in entry_points.items()]
        (info / "entry_points.txt").write_text("[accelkit]\n" + "\n".join(lines) + "\n")
        for module, source in (modules or {}).items():
            (self.path / f"{module}.py").write_text(textwrap.dedent(source))
        importlib.invalidate_caches()

    def entry_points(self) -> list[Any]:
        """This site's accelkit entry points only: a Registry's ``entry_points`` source."""
        return [
            ep
            for dist in metadata.distributions(path=[str(self.path)])
            for ep in dist.entry_points
            if ep.group == registry.ENTRY_POINT_GROUP
        ]
