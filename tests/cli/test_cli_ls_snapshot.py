"""`accelkit ls` and `accelkit snapshot`, run as the user runs them: in a subprocess."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from accelkit import registry
from accelkit.host import FakeHost, load_snapshot
from accelkit.node._detect import detect_node
from accelkit.node._record import Node
from accelkit.node._snapshot import record_snapshot


def accelkit(*args: str, **variables: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "accelkit.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **variables},  # the session's has no ACCELKIT_* (tests/conftest.py)
        timeout=60,
    )


@pytest.fixture(scope="module")
def empty(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record_snapshot(tmp_path_factory.mktemp("empty") / "snap", FakeHost())


@pytest.fixture(scope="module")
def vendor_snapshot(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """A snapshot of the first built-in vendor whose fake host and plugin are available."""
    registry.reset()
    loaded = {m.name for m in registry.managers()}
    for vendor in ("nvidia", "amd", "tpu", "neuron", "ascend", "gaudi", "intel"):
        module = f"accelkit_plugins.{vendor}.testing"
        if vendor in loaded and importlib.util.find_spec(module) is not None:
            root = tmp_path_factory.mktemp(vendor)
            host = importlib.import_module(module).make_host(2, root)
            directory = record_snapshot(tmp_path_factory.mktemp("snaps") / vendor, host)
            if any(d.family == vendor for d in detect_node(load_snapshot(directory)).devices):
                return vendor, directory
    pytest.skip("no built-in vendor has a working fake host yet")


def test_ls_says_clearly_when_there_is_no_accelerator(empty: Path) -> None:
    result = accelkit("ls", "--host", str(empty))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("No accelerators found on this node.")
    assert "-v shows them" in result.stdout
    verbose = accelkit("ls", "--host", str(empty), "-v")
    assert "Diagnostics:" in verbose.stdout and "info" in verbose.stdout


def test_ls_lists_devices_resources_labels_and_json(vendor_snapshot: tuple[str, Path]) -> None:
    vendor, directory = vendor_snapshot
    result = accelkit("ls", "--host", str(directory))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == [
        "FAMILY",
        "RESOURCE",
        "ID",
        "TYPE",
        "MODEL",
        "MEMORY",
        "BUS",
        "ID",
        "NUMA",
        "SOURCE",
    ]
    assert [line.split()[0] for line in lines[1:3]] == [vendor, vendor]
    assert "Resources:" in lines and "Labels:" in lines
    assert f"  accelkit/{vendor}.count = 2" in lines
    as_json = accelkit("ls", "--host", str(directory), "--json")
    node = Node.from_dict(json.loads(as_json.stdout))
    assert node.to_dict() == detect_node(load_snapshot(directory)).to_dict()
    assert len([d for d in node.devices if d.family == vendor]) == 2


def test_ls_override_adds_logical_gpus(empty: Path) -> None:
    result = accelkit("ls", "--host", str(empty), "--override", "GPU=2", "--override", "x=0.5")
    assert result.returncode == 0, result.stderr
    rows = [line.split() for line in result.stdout.splitlines()[1:3]]
    assert [(r[0], r[1], r[2], r[-1]) for r in rows] == [
        ("nvidia", "GPU", "0", "override"),
        ("nvidia", "GPU", "1", "override"),
    ]
    assert "  GPU = 2" in result.stdout and "  x = 0.5" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--override", "GPU=two"], "'two' is not a number"),
        (["--override", "GPU=1.5"], "whole number"),
        (["--override", "GPU=-1"], "must not be negative"),
    ],
)
def test_ls_errors_are_sentences_not_tracebacks(empty: Path, args: list[str], message: str) -> None:
    result = accelkit("ls", "--host", str(empty), *args)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_ls_of_a_directory_that_is_no_snapshot(tmp_path: Path) -> None:
    result = accelkit("ls", "--host", str(tmp_path))
    assert result.returncode == 2
    assert "is not a snapshot" in result.stderr and "Traceback" not in result.stderr
    # a plugin author's fake root tree is no snapshot either: say how to make one
    assert "accelkit.node.record_snapshot(DIR, host)" in result.stderr


def test_ls_reports_a_malformed_override_variable_of_the_snapshot(
    empty: Path, tmp_path: Path
) -> None:
    data = json.loads((empty / "snapshot.json").read_text())
    data["env"]["ACCELKIT_OVERRIDE_RESOURCES"] = "GPU=2"
    (tmp_path / "snapshot.json").write_text(json.dumps(data))
    result = accelkit("ls", "--host", str(tmp_path))
    assert result.returncode == 2
    assert "ACCELKIT_OVERRIDE_RESOURCES='GPU=2' is not JSON" in result.stderr


def test_snapshot_records_refuses_a_non_empty_directory_and_forces(
    vendor_snapshot: tuple[str, Path], tmp_path: Path
) -> None:
    vendor, source = vendor_snapshot
    target = tmp_path / "copy"
    result = accelkit("snapshot", str(target), "--host", str(source), "--redact")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"Recorded {target} (redacted):")
    assert f"Replays as: 2 {registry.get_manager(vendor).resource_name}" in result.stdout
    assert json.loads((target / "snapshot.json").read_text())["redacted"] is True
    again = accelkit("snapshot", str(target), "--host", str(source))
    assert again.returncode == 2
    assert "is not empty" in again.stderr and "--force" in again.stderr
    forced = accelkit("snapshot", str(target), "--host", str(source), "--force")
    assert forced.returncode == 0, forced.stderr
    assert (
        detect_node(load_snapshot(target)).to_dict() == detect_node(load_snapshot(source)).to_dict()
    )


EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "nodes"


@pytest.mark.parametrize("redact", [False, True], ids=["plain", "redacted"])
def test_snapshot_re_records_a_snapshot_in_place(tmp_path: Path, redact: bool) -> None:
    """``--host SRC --force SRC`` deleted SRC's files before detection read them through the
    replay, and said "0 file(s)", "Replays as: no accelerators", exit 0. It records beside SRC
    and then takes its place; other files there are kept, and no stage is left behind."""
    source = tmp_path / "tpu"
    shutil.copytree(EXAMPLES / "tpu-v6e-8", source, symlinks=True)
    (source / "README").write_text("mine")
    before = detect_node(load_snapshot(source)).to_dict()
    redacting = ["--redact"] if redact else []
    result = accelkit("snapshot", "--host", str(source), *redacting, "--force", str(source))
    assert result.returncode == 0, result.stderr
    assert "Replays as: 8 TPU." in result.stdout and " 0 file(s)" not in result.stdout
    assert detect_node(load_snapshot(source)).to_dict() == before
    assert json.loads((source / "snapshot.json").read_text())["redacted"] is redact
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tpu"]
    assert (source / "README").read_text() == "mine"


def test_snapshot_into_a_directory_holding_its_source_keeps_the_source_until_recorded(
    tmp_path: Path,
) -> None:
    source = tmp_path / "snaps" / "tpu"
    shutil.copytree(EXAMPLES / "tpu-v6e-8", source, symlinks=True)
    result = accelkit("snapshot", "--host", str(source), "--force", str(tmp_path / "snaps"))
    assert result.returncode == 0, result.stderr
    assert detect_node(load_snapshot(tmp_path / "snaps")).resources["TPU"] == 8


@pytest.mark.parametrize("inside", ["root/dev", "sub"])
def test_snapshot_inside_its_source_is_refused(tmp_path: Path, inside: str) -> None:
    """Recording into a directory inside the replayed snapshot writes into the files it reads."""
    source = tmp_path / "tpu"
    shutil.copytree(EXAMPLES / "tpu-v6e-8", source, symlinks=True)
    target = source / inside
    result = accelkit("snapshot", "--host", str(source), "--force", str(target))
    assert result.returncode == 2
    assert result.stderr == (
        f"accelkit snapshot: error: {target} lies inside {source}, the snapshot --host replays: "
        "the recording would write into the files it reads; record into a directory outside it\n"
    )
    assert detect_node(load_snapshot(source)).resources["TPU"] == 8
    assert not (target / "snapshot.json").exists()


def test_snapshot_writes_through_no_link_planted_for_its_manifest(tmp_path: Path) -> None:
    """A dangling ``snapshot.json`` link (planted in a directory others may write) read as no
    manifest, and writing the manifest created the file it pointed at. Forced, the link is
    replaced; the file it names is never made."""
    source = Path(__file__).resolve().parents[2] / "examples" / "nodes" / "nvidia-h100-1gpu"
    target, victim = tmp_path / "shared", tmp_path / "victim.txt"
    target.mkdir()
    (target / "snapshot.json").symlink_to(victim)
    refused = accelkit("snapshot", str(target), "--host", str(source))
    assert refused.returncode == 2 and not victim.exists()
    forced = accelkit("snapshot", str(target), "--host", str(source), "--force")
    assert forced.returncode == 0, forced.stderr
    assert not victim.exists() and not (target / "snapshot.json").is_symlink()
    assert json.loads((target / "snapshot.json").read_text())["format"]


def test_snapshot_into_a_file_is_an_error(tmp_path: Path, empty: Path) -> None:
    (tmp_path / "file").write_text("")
    result = accelkit("snapshot", str(tmp_path / "file"), "--host", str(empty))
    assert result.returncode == 2
    assert "not a directory" in result.stderr and "Traceback" not in result.stderr


def test_every_verb_refuses_a_host_that_is_no_snapshot(tmp_path: Path) -> None:
    for verb in (["ls"], ["plugins"], ["snapshot", str(tmp_path / "out")], ["env", "-r", "GPU=1"]):
        result = accelkit(*verb, "--host", str(tmp_path / "missing"))
        assert result.returncode == 2, (verb, result.stderr)
        assert "is not a snapshot" in result.stderr, verb
        assert "Traceback" not in result.stderr, verb


def test_a_bad_override_variable_of_this_machine_is_a_sentence(tmp_path: Path) -> None:
    result = accelkit("ls", ACCELKIT_OVERRIDE_RESOURCES="{GPU: 2")
    assert result.returncode == 2
    assert "ACCELKIT_OVERRIDE_RESOURCES='{GPU: 2' is not JSON" in result.stderr
    assert 'write an object such as {"GPU": 2}' in result.stderr
    assert "Traceback" not in result.stderr


def test_a_malformed_exclusion_is_a_warning_in_the_listing() -> None:
    result = accelkit("ls", ACCELKIT_EXCLUDE_DEVICES="nvidia")
    assert result.returncode == 0, result.stderr
    assert "ACCELKIT_EXCLUDE_DEVICES entry 'nvidia' is not family:device" in result.stdout


def test_snapshot_into_an_unwritable_place_is_a_sentence(tmp_path: Path, empty: Path) -> None:
    (tmp_path / "file").write_text("")
    result = accelkit("snapshot", str(tmp_path / "file" / "snap"), "--host", str(empty))
    assert result.returncode == 2
    assert f"cannot write a snapshot into {tmp_path / 'file' / 'snap'}: " in result.stderr
    assert "Errno" not in result.stderr and "Traceback" not in result.stderr
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        result = accelkit("snapshot", str(locked / "snap"), "--host", str(empty))
        assert result.returncode == 2
        assert "Permission denied" in result.stderr and "Traceback" not in result.stderr


def test_ls_prints_each_diagnostic_once(empty: Path) -> None:
    """Two detection layers that both find a command missing say so once (neuron-ls twice)."""
    result = accelkit("ls", "--host", str(empty), "-v")
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("  info")]
    assert lines and len(lines) == len(set(lines)), "\n".join(lines)


def test_ls_label_prefix(empty: Path) -> None:
    result = accelkit("ls", "--host", str(empty), "--override", "GPU=1", "--label-prefix", "x.io/")
    assert result.returncode == 0, result.stderr
    assert "  x.io/nvidia.count = 1" in result.stdout
    assert "accelkit/" not in result.stdout
    as_json = accelkit("ls", "--host", str(empty), "--override", "GPU=1", "--json")
    assert Node.from_dict(json.loads(as_json.stdout)).labels == {"accelkit/nvidia.count": "1"}


def test_a_reader_that_stops_early_is_no_error() -> None:
    # `accelkit ls --json | head -1`: the pipe closes before accelkit writes.
    node = str(Path(__file__).resolve().parents[2] / "examples" / "nodes" / "nvidia-h100-8gpu")
    child = subprocess.Popen(
        [sys.executable, "-m", "accelkit.cli", "ls", "--json", "--host", node],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()
    stderr = child.stderr.read().decode()
    assert child.wait(timeout=60) == 0
    assert stderr == ""


def test_python_dash_m_accelkit_is_the_command() -> None:
    """Where no ``accelkit`` script is on PATH (a venv with ``--system-site-packages``)."""
    node = str(Path(__file__).parents[2] / "examples" / "nodes" / "gaudi2-8")
    package = subprocess.run(
        [sys.executable, "-m", "accelkit", "ls", "--json", "--host", node],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(package.stdout) == json.loads(accelkit("ls", "--json", "--host", node).stdout)


def test_ls_says_when_third_party_plugins_were_not_loaded() -> None:
    # A user who sets it (or inherits it) and misses a vendor's devices is told why.
    node = str(Path(__file__).parents[2] / "examples" / "nodes" / "gaudi2-8")
    off = accelkit("ls", "--host", node, ACCELKIT_DISABLE_PLUGIN_AUTOLOAD="1")
    assert off.returncode == 0, off.stderr
    assert off.stdout.rstrip().endswith(
        "ACCELKIT_DISABLE_PLUGIN_AUTOLOAD is set: third-party plugins were not loaded."
    )
    assert "were not loaded" not in accelkit("ls", "--host", node).stdout
    required = accelkit(  # a built-in named there is no third-party exception
        "ls",
        "--host",
        node,
        ACCELKIT_DISABLE_PLUGIN_AUTOLOAD="1",
        ACCELKIT_REQUIRE_PLUGINS="nvidia,acme",
    )
    assert required.stdout.rstrip().endswith(
        "third-party plugins were not loaded, but for those ACCELKIT_REQUIRE_PLUGINS names (acme)."
    ), required
