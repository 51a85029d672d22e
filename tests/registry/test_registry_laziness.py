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

PLUGIN_MODULES = ("accelkit_plugins.", "accelkit_plugins.hints", "accelkit_example")
VENDOR_LIBRARIES = ("pynvml", "amdsmi", "dpctl", "acl", "habana_frameworks", "torch", "jax")
ENGINES = ("distributed", "dask", "ray", "accelkit.exports", "accelkit.integrations")
"""Engines (extras) and the modules that serve them load only when used."""
LIGHT = (
    *("Device", "Host", "LocalHost", "FakeHost", "CommandResult", "ProbeError"),
    *("AccelkitError", "InvalidRequest", "Unsatisfiable", "ConfigurationError", "PluginError"),
    "UnknownFamily",
    *("AcceleratorManager", "API_VERSION", "ACCELERATOR_TYPE_PREFIX", "Diagnostic", "note"),
    *("Placement", "LOWEST_FREE", "ALIGNED_BLOCKS", "CONTIGUOUS"),
)
"""Public names a plugin or a test uses that must not load pluggy or the registry."""


@pytest.mark.parametrize(
    ("statement", "registry_loaded"),
    [
        ("import accelkit; accelkit.AcceleratorManager; accelkit.FakeHost", False),
        (f"import accelkit; {'; '.join(f'accelkit.{n}' for n in LIGHT)}", False),
        ("import accelkit.registry", True),
        ("import accelkit; accelkit.Node; accelkit.detect_node; accelkit.hookimpl", True),
        # `accelkit ps`: reading a ledger needs no node, so no plugin and no detection.
        (
            "import tempfile; from accelkit.ledger import Ledger; import accelkit.pool._pool; "
            "Ledger(tempfile.mkdtemp() + '/ledger.json').grants()",
            False,
        ),
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
    assert ("pluggy" in loaded) is registry_loaded
    assert not [m for m in loaded if m.startswith(PLUGIN_MODULES)]
    assert not [m for m in loaded if m.split(".")[0] in VENDOR_LIBRARIES]
    assert not [m for m in loaded if m.startswith(ENGINES)]


def test_builtins_alone_never_import_importlib_metadata() -> None:
    """With autoload off and only the built-ins, discovery and detection need no distribution
    metadata, so ``importlib.metadata`` (and the email parser it brings) is never imported."""
    script = (
        "import json, sys, accelkit\n"
        "accelkit.detect_node(accelkit.FakeHost(), registry=accelkit.Registry(autoload=False))\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    loaded = set(json.loads(result.stdout))
    assert "accelkit.registry" in loaded
    assert not {"importlib.metadata", "importlib_metadata", "email"} & loaded


def test_import_accelkit_imports_little_beyond_a_bare_interpreter() -> None:
    """``import accelkit`` costs about what a bare interpreter does: not even ``typing`` (which
    brings ``re``, ``functools`` and ``collections`` with it)."""
    script = "import json, sys\nbare = set(sys.modules)\nimport accelkit\n"
    script += "print(json.dumps(sorted(set(sys.modules) - bare)))\n"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    added = set(json.loads(result.stdout))
    assert added <= {"accelkit", "accelkit._lazy", "importlib"}, added
