"""``accelkit check`` as a user runs it: a subprocess, against installed (or fake-installed)
plugins, with exit codes and reports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from accelkit.testing import all_checks
from kit_support import BROKEN, REPO, write_distribution


def accelkit(*args: str, path: tuple[Path, ...] = ()) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*map(str, path), env.get("PYTHONPATH", "")])
    for variable in ("ACCELKIT_DISABLE_PLUGINS", "ACCELKIT_DISABLE_PLUGIN_AUTOLOAD"):
        env.pop(variable, None)
    return subprocess.run(
        [sys.executable, "-m", "accelkit.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_the_example_plugin_is_green() -> None:
    result = accelkit("check", "acme")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith(
        "accelkit check acme: AcmeManager, plugin 'acme' (accelkit-example 0.1.0)"
    )
    assert f"PASSED: {len(all_checks())} passed" in result.stdout


def test_json_lists_every_check() -> None:
    result = accelkit("check", "acme", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] is True
    [target] = report["results"]
    assert target["family"] == "acme" and target["plugin"]["dist"] == "accelkit-example"
    assert [o["check"] for o in target["outcomes"]] == [c.name for c in all_checks()]
    assert {o["status"] for o in target["outcomes"]} == {"passed"}


def test_a_builtin_is_green() -> None:
    result = accelkit("check", "nvidia")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "plugin 'nvidia' (accelkit 0.1.0, built-in)" in result.stdout


def test_a_node_snapshot_is_detected_under_the_audit_too() -> None:
    snapshot = REPO / "examples" / "nodes" / "nvidia-h100-8gpu"
    result = accelkit("check", "nvidia", "--host", str(snapshot))
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_broken_plugin_is_red_with_reasons(tmp_path: Path) -> None:
    site = write_distribution(
        tmp_path, "accelkit-broken", "0.1.0", {"accelkit": {"broken": "accelkit_broken"}}
    )
    result = accelkit("check", "broken", path=(site, BROKEN / "src"))
    assert result.returncode == 1
    out = result.stdout
    assert "    FAIL  empty_host\n" in out
    assert "detect() on an empty FakeHost did os.listdir(/dev), outside its host" in out
    assert "accelkit_broken/__init__.py:" in out  # points at the offending line
    assert "writes BROKEN_VISIBLE_DEVICES=' ', with whitespace" in out
    assert "validate_quantity(-1) accepted it as 10000 units" in out
    assert "    skip  requested_counts\n" in out
    assert "no host builder for family 'broken': declare one in the 'accelkit.testing'" in out
    assert out.rstrip().endswith("FAILED: 7 passed, 12 failed, 6 skipped")


def test_a_plugin_that_does_not_load_is_red(tmp_path: Path) -> None:
    site = write_distribution(
        tmp_path, "accelkit-ghost", "2.0", {"accelkit": {"ghost": "accelkit_ghost_missing"}}
    )
    result = accelkit("check", "ghost", path=(site,))
    assert result.returncode == 1
    assert "    FAIL  entry_point\n" in result.stdout
    assert "plugin 'ghost' (accelkit-ghost 2.0) is not in use (error)" in result.stdout
    assert "accelkit_ghost_missing" in result.stdout

    everything = accelkit("check", "--json", path=(site,))
    assert everything.returncode == 1
    verdicts = {r["family"]: r["ok"] for r in json.loads(everything.stdout)["results"]}
    assert verdicts.pop("ghost") is False
    assert set(verdicts) >= {"nvidia", "amd", "intel", "neuron", "tpu", "gaudi", "ascend", "acme"}
    assert all(verdicts.values()), verdicts


def test_an_unknown_name_is_a_usage_error() -> None:
    result = accelkit("check", "nosuchfamily")
    assert result.returncode == 2
    assert "no accelerator family 'nosuchfamily'; known: nvidia, amd" in result.stderr
    assert "plugins: nvidia, amd, intel, neuron, tpu, gaudi, ascend, hints, acme" in result.stderr
    hooks_only = accelkit("check", "hints")
    assert hooks_only.returncode == 2
    assert "plugin 'hints' (accelkit 0.1.0, built-in) provides no accelerator family" in (
        hooks_only.stderr
    )


def test_the_runner_needs_no_pytest_and_the_suite_says_what_to_install() -> None:
    script = (
        "import sys\n"
        "sys.modules['pytest'] = None\n"
        "import accelkit.testing\n"
        "from accelkit.cli import main\n"
        "code = main(['check', 'acme'])\n"
        "try:\n"
        "    accelkit.testing.AcceleratorManagerSuite\n"
        "except ImportError as exc:\n"
        "    print('IMPORT ERROR:', exc)\n"
        "sys.exit(code)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASSED" in result.stdout
    assert (
        "IMPORT ERROR: AcceleratorManagerSuite needs pytest: pip install 'accelkit[testing]'"
        in (result.stdout)
    )


def test_importing_the_kit_imports_no_pytest_and_no_check() -> None:
    script = (
        "import sys, accelkit.testing\n"
        "print(sorted(m for m in sys.modules if m == 'pytest' or m.startswith('accelkit.')))"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.stdout.strip() == "['accelkit.testing']", result.stderr
