"""Discovery is lazy: importing accelkit (or the registry) loads no plugin and scans nothing."""

from __future__ import annotations

import ast
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


HEAVY = ("typing", "re", "functools", "collections", "enum", "json", "dataclasses", "inspect")
HEAVY += ("subprocess", "threading", "importlib.metadata", "email", "pluggy", "accelkit.registry")
"""Modules ``import accelkit`` must not add: what a cheap import would cost (a denylist, never a
timing)."""


def modules_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code``, told without importing
    anything more (``json`` alone would bring ``re``)."""
    script = f"import sys\n{code}\nprint(sorted(sys.modules))\n"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return set(ast.literal_eval(result.stdout))


def test_import_accelkit_imports_little_beyond_a_bare_interpreter() -> None:
    """``import accelkit`` costs about what a bare interpreter does: not even ``typing`` (which
    brings ``re``, ``functools`` and ``collections`` with it). Measured against ``python -c
    pass`` in the same interpreter, since what a bare one loads differs by version (3.12 has not
    loaded ``__future__`` or ``warnings`` yet) and by the site's ``.pth`` files."""
    added = modules_after("import accelkit") - modules_after("pass")
    assert {m for m in added if m.startswith("accelkit")} == {"accelkit", "accelkit._lazy"}
    assert not added & set(HEAVY), sorted(added & set(HEAVY))
