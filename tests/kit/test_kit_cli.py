"""``accelkit check`` as a user runs it: a subprocess, against installed (or fake-installed)
plugins, with exit codes and reports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from accelkit.testing import all_checks
from kit_support import BROKEN, REPO, install_fake, write_distribution
from own_plugins import ours_only


def accelkit(
    *args: str, path: tuple[Path, ...] = (), only_ours: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run ``accelkit ARGS`` with ``path`` on its ``sys.path``; ``only_ours``: without the plugins
    the machine happens to have beside this repository's and ``path``'s (for a test that checks
    every plugin installed)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*map(str, path), env.get("PYTHONPATH", "")])
    for variable in ("ACCELKIT_DISABLE_PLUGINS", "ACCELKIT_DISABLE_PLUGIN_AUTOLOAD"):
        env.pop(variable, None)
    return subprocess.run(
        [sys.executable, "-m", "accelkit.cli", *args],
        capture_output=True,
        text=True,
        env=ours_only(env) if only_ours else env,
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
    site = install_fake((BROKEN / "pyproject.toml").read_text(), tmp_path)
    result = accelkit("check", "broken", path=(site, BROKEN / "src"))
    assert result.returncode == 1
    out = result.stdout
    assert "    FAIL  empty_host\n" in out
    assert "detect() raised on an empty FakeHost: FileNotFoundError: brk-smi: not found" in out
    assert "accelkit_broken/__init__.py:" in out  # points at the offending line
    assert "did os.environ['BROKEN_DEBUG'], os.listdir(/dev): a manager looks" in out
    assert "writes BROKEN_VISIBLE_DEVICES=' ', with whitespace" in out
    assert "importing accelkit_broken imports ['pytest']" in out
    assert "does not depend on accelkit (requires []); add 'accelkit'" in out
    assert "    ok    requested_counts\n" in out  # its backdoor works: every check could run
    assert "    FAIL  device_files_without_tools\n" in out
    assert out.rstrip().endswith("FAILED: 11 passed, 16 failed")


def test_without_a_backdoor_host_checks_are_skipped_and_say_how(tmp_path: Path) -> None:
    site = write_distribution(
        tmp_path, "accelkit-broken", "0.1.0", {"accelkit": {"broken": "accelkit_broken"}}
    )
    result = accelkit("check", "broken", path=(site, BROKEN / "src"))
    assert result.returncode == 1
    assert "    skip  requested_counts\n" in result.stdout
    assert (
        "no host builder for family 'broken': declare one in the 'accelkit.testing' entry-point "
        'group (broken = "yourpackage.fakes:make_host")'
    ) in result.stdout
    assert "8 skipped" in result.stdout


def test_a_declared_backdoor_that_does_not_load_fails(tmp_path: Path) -> None:
    site = write_distribution(
        tmp_path,
        "accelkit-broken",
        "0.1.0",
        {
            "accelkit": {"broken": "accelkit_broken"},
            "accelkit.testing": {"broken": "accelkit_broken.fakes:make_hosts"},
        },
    )
    result = accelkit("check", "broken", "--json", path=(site, BROKEN / "src"))
    assert result.returncode == 1
    [target] = json.loads(result.stdout)["results"]
    outcome = {o["check"]: o for o in target["outcomes"]}["requested_counts"]
    assert outcome["status"] == "failed"  # not skipped: the package says it has a backdoor
    assert outcome["message"].startswith(
        "entry point accelkit.testing:broken = 'accelkit_broken.fakes:make_hosts' does not load: "
        "AttributeError"
    )
    assert not any(o["status"] == "skipped" for o in target["outcomes"])


def test_a_plugin_that_does_not_load_is_red(tmp_path: Path) -> None:
    site = write_distribution(
        tmp_path, "accelkit-ghost", "2.0", {"accelkit": {"ghost": "accelkit_ghost_missing"}}
    )
    result = accelkit("check", "ghost", path=(site,))
    assert result.returncode == 1
    assert "    FAIL  entry_point\n" in result.stdout
    assert "plugin 'ghost' (accelkit-ghost 2.0) is not in use (error)" in result.stdout
    assert "accelkit_ghost_missing" in result.stdout

    everything = accelkit("check", "--json", path=(site,), only_ours=True)
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
    assert result.stdout.strip() == "['accelkit._lazy', 'accelkit.testing']", result.stderr


WITHOUT_PYTEST = """
import sys

class NoPytest:  # as if the testing extra were not installed
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ("pytest", "_pytest"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, NoPytest())
from accelkit.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_without_the_testing_extra_check_runs_and_says_what_to_install(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "nopt_plugin.py").write_text(
        "from accelkit import hookimpl\n"
        "from accelkit_example import AcmeManager\n\n"
        "class NoptManager(AcmeManager):\n"
        "    name = 'nopt'\n    resource_name = 'NOPT'\n"
        "    visible_devices_env_var = 'NOPT_VISIBLE_DEVICES'\n\n"
        "@hookimpl\ndef accelkit_register_managers():\n    return [NoptManager()]\n"
    )
    (source / "nopt_fakes.py").write_text(
        "import pytest  # test helpers: needs the testing extra\n"
        "from accelkit_example.fakes import make_host\n"
    )
    site = write_distribution(
        tmp_path / "site",
        "accelkit-nopt",
        "1.0",
        {"accelkit": {"nopt": "nopt_plugin"}, "accelkit.testing": {"nopt": "nopt_fakes:make_host"}},
    )
    env = dict(os.environ)
    paths = (site, source, BROKEN / "src")  # before the inherited path, which may hold accelkit
    env["PYTHONPATH"] = os.pathsep.join([*map(str, paths), env.get("PYTHONPATH", "")])
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_PYTEST, "check", "nopt", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 1, result.stderr
    [target] = json.loads(result.stdout)["results"]
    outcomes = {o["check"]: o for o in target["outcomes"]}
    assert outcomes["declarations"]["status"] == "passed"  # the checks run without pytest
    assert outcomes["placement_sound"]["status"] == "passed"
    assert outcomes["requested_counts"]["status"] == "failed"
    assert outcomes["requested_counts"]["message"].endswith(
        "does not load: ModuleNotFoundError: No module named 'pytest' (pytest is in the "
        "testing extra: pip install 'accelkit[testing]')"
    )
