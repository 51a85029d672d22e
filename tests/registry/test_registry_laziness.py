"""Discovery is lazy: importing accelkit (or the registry) loads no plugin and scans nothing."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PROBE = """
import importlib.metadata as md, json, sys
def refuse(*args, **kwargs):
    raise AssertionError("entry points were scanned")
md.entry_points = refuse
md.distributions = refuse
{statement}
print(json.dumps(sorted(sys.modules)))
"""

PLUGIN_MODULES = ("accelkit_plugins.", "accelkit.hints", "accelkit_example")


@pytest.mark.parametrize(
    ("statement", "registry_loaded"),
    [
        ("import accelkit; accelkit.AcceleratorManager; accelkit.FakeHost", False),
        ("import accelkit.registry", True),
    ],
)
def test_import_loads_no_plugin_and_scans_no_entry_point(
    statement: str, registry_loaded: bool
) -> None:
    result = subprocess.run(
        [sys.executable, "-c", PROBE.format(statement=statement)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    loaded = set(json.loads(result.stdout))
    assert ("accelkit.registry" in loaded) is registry_loaded
    assert not [m for m in loaded if m.startswith(PLUGIN_MODULES)]
