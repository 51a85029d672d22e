"""``accelkit plugins`` as users run it: a subprocess over the real entry points."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from accelkit import registry
from fake_dists import PLUGIN_VARS, FakeSite
from own_plugins import ours_only

NODES = Path(__file__).resolve().parents[2] / "examples" / "nodes"
BUILTINS = ["nvidia", "amd", "intel", "neuron", "tpu", "gaudi", "ascend", "hints"]


def accelkit(
    *args: str, pythonpath: Path | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    """Run ``accelkit ARGS`` with only the plugin variables given here, and the plugins of this
    repository and ``pythonpath``: none the machine happens to have beside them (each test
    pins the exit status, which one that fails to load makes 1)."""
    environ = {k: v for k, v in os.environ.items() if k not in PLUGIN_VARS}
    if pythonpath is not None:
        environ["PYTHONPATH"] = os.pathsep.join([str(pythonpath), environ.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "accelkit.cli", *args],
        capture_output=True,
        text=True,
        env=ours_only({**environ, **env}),
    )


def test_json_lists_builtins_then_the_installed_example() -> None:
    result = accelkit("plugins", "--json")
    assert result.returncode == 0, result.stderr
    records = json.loads(result.stdout)
    assert [r["name"] for r in records[: len(BUILTINS)]] == BUILTINS
    example = [r for r in records if r["name"] == "acme"]
    assert example == [
        {
            "name": "acme",
            "module": "accelkit_example",
            "origin": "entry-point",
            "dist": "accelkit-example",
            "version": "0.1.0",
            "status": "ok",
            "error": None,
            "families": ["acme"],
            "problems": [],
            "notes": [],
        }
    ], "install it: python3 -m pip install -e examples/accelkit-example"


def test_table_shows_each_plugin_with_its_distribution_and_status() -> None:
    result = accelkit("plugins", ACCELKIT_DISABLE_PLUGINS="gaudi")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["NAME", "ORIGIN", "DISTRIBUTION", "STATUS", "FAMILIES", "NOTE"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert rows["nvidia"] == ["nvidia", "builtin", "accelkit", "0.1.0", "ok", "nvidia"]
    assert rows["gaudi"][4:] == ["disabled", "-", "blocked", "by", "ACCELKIT_DISABLE_PLUGINS"]
    assert rows["acme"] == ["acme", "entry-point", "accelkit-example", "0.1.0", "ok", "acme"]


def test_a_broken_installed_plugin_is_shown_and_exits_1(tmp_path: Path) -> None:
    site = FakeSite(tmp_path)
    site.add("accelkit-flaky", {"flaky": "flaky_plugin"}, {"flaky_plugin": "1 / 0\n"}, "0.2")
    result = accelkit("plugins", pythonpath=tmp_path)
    assert result.returncode == 1
    row = next(line for line in result.stdout.splitlines() if line.startswith("flaky "))
    assert row.split()[1:5] == ["entry-point", "accelkit-flaky", "0.2", "error"]
    assert row.endswith("import failed: ZeroDivisionError: division by zero")
    assert "PluginWarning" not in result.stderr, "the table already says it"


def test_autoload_off_says_so_and_a_missing_required_plugin_exits_1() -> None:
    result = accelkit(
        "plugins", ACCELKIT_DISABLE_PLUGIN_AUTOLOAD="1", ACCELKIT_REQUIRE_PLUGINS="ghost"
    )
    assert result.returncode == 1
    assert "acme" not in result.stdout
    assert (
        "ACCELKIT_DISABLE_PLUGIN_AUTOLOAD is set: third-party plugins were not loaded, but for "
        "those ACCELKIT_REQUIRE_PLUGINS names (ghost)."
    ) in result.stdout
    assert result.stderr.startswith(
        "accelkit plugins: ACCELKIT_REQUIRE_PLUGINS names plugins that are not in use: 'ghost' is "
        "not installed"
    )


def test_host_counts_each_familys_devices(tmp_path: Path) -> None:
    from accelkit_example.fakes import make_host

    root = tmp_path / "snap" / "root"
    root.mkdir(parents=True)
    make_host(2, root)
    manifest = {"format": "accelkit-snapshot", "version": 1, "env": {}, "commands": []}
    (tmp_path / "snap" / "snapshot.json").write_text(json.dumps(manifest))
    result = accelkit("plugins", "--json", "--host", str(tmp_path / "snap"))
    assert result.returncode == 0, result.stderr
    devices = {r["name"]: r.get("devices") for r in json.loads(result.stdout)}
    assert devices["acme"] == {"acme": 2}
    assert devices["nvidia"] == {"nvidia": 0}


def test_host_counts_only_the_devices_a_family_offers(tmp_path: Path) -> None:
    import dataclasses

    from accelkit.host import FakeHost
    from accelkit.node._snapshot import record_snapshot
    from accelkit.testing.fakes import nvidia as fake
    from accelkit_plugins.nvidia import testing as nvidia_hosts

    modes = (0, 2, 0)  # GPU 1 in the Prohibited compute mode: CUDA counts it, no worker may use it
    gpus = [dataclasses.replace(g, compute_mode=m) for g, m in zip(fake.fake_gpus(3), modes)]
    nvidia_hosts.write_sysfs(tmp_path / "root", gpus)
    commands = {
        nvidia_hosts.NVIDIA_SMI_ARGV: (0, nvidia_hosts.nvidia_smi_output(gpus)),
        nvidia_hosts.COMPUTE_MODE_ARGV: (0, nvidia_hosts.compute_mode_output(gpus)),
    }
    snapshot = record_snapshot(
        tmp_path / "snap", FakeHost(root=tmp_path / "root", commands=commands)
    )
    result = accelkit("plugins", "--json", "--host", str(snapshot))
    assert result.returncode == 0, result.stderr
    devices = {r["name"]: r.get("devices") for r in json.loads(result.stdout)}
    assert devices["nvidia"] == {"nvidia": 2}


def test_host_shows_each_plugins_detection_problems(tmp_path: Path) -> None:
    """A layer cut by its budget is the plugin's problem, as in `accelkit ls -v`; the counts
    come from that same detection."""
    snapshot = tmp_path / "snap"
    shutil.copytree(NODES / "nvidia-h100-8gpu", snapshot)
    manifest = json.loads((snapshot / "snapshot.json").read_text())
    manifest["commands"][0] = {"argv": manifest["commands"][0]["argv"], "error": "timeout"}
    (snapshot / "snapshot.json").write_text(json.dumps(manifest))
    result = accelkit("plugins", "--json", "--host", str(snapshot))
    assert result.returncode == 0, result.stderr
    nvidia = next(r for r in json.loads(result.stdout) if r["name"] == "nvidia")
    assert nvidia["devices"] == {"nvidia": 8}  # from sysfs, the next layer
    assert len(nvidia["problems"]) == 1 and "timed out" in nvidia["problems"][0]
    table = accelkit("plugins", "--host", str(snapshot)).stdout
    assert "timed out" in next(line for line in table.splitlines() if line.startswith("nvidia "))


SLEEPY = """
import pathlib, time
from accelkit import AcceleratorManager, hookimpl

class Manager(AcceleratorManager):
    name = "sleepy"
    resource_name = "SLEEPY"

    def detect(self, host):
        pathlib.Path(__file__).with_name("detected").touch()
        time.sleep(30)
        return []

@hookimpl
def accelkit_register_managers():
    return [Manager()]
"""


def test_detect_shows_a_hung_plugin_and_without_it_nothing_is_detected(tmp_path: Path) -> None:
    site = FakeSite(tmp_path)
    site.add("accelkit-sleepy", {"sleepy": "sleepy_plugin"}, {"sleepy_plugin": SLEEPY})
    listed = accelkit("plugins", "--json", pythonpath=tmp_path)
    assert listed.returncode == 0, listed.stderr
    sleepy = next(r for r in json.loads(listed.stdout) if r["name"] == "sleepy")
    assert sleepy["problems"] == [] and "devices" not in sleepy
    assert not (tmp_path / "detected").exists(), "a plain `accelkit plugins` detects nothing"
    result = accelkit(
        "plugins", "--json", "--detect", pythonpath=tmp_path, ACCELKIT_DETECT_TIMEOUT="0.5"
    )
    assert result.returncode == 0, result.stderr
    sleepy = next(r for r in json.loads(result.stdout) if r["name"] == "sleepy")
    assert sleepy["devices"] == {"sleepy": None}
    assert sleepy["problems"] == [
        "detect() did not finish within 0.5s (ACCELKIT_DETECT_TIMEOUT); no devices"
    ]


def test_help_documents_the_exit_status() -> None:
    result = accelkit("plugins", "--help")
    assert result.returncode == 0
    assert "Exit status: 0 when every plugin is ok" in " ".join(result.stdout.split())
    assert registry.ENTRY_POINT_GROUP in result.stdout
