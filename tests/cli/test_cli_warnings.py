"""Warnings (a broken third-party plugin, ...) reach the user as the verbs' errors do: one line
on stderr, ``accelkit VERB: warning: ...``, never Python's file, line and source line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fake_dists import FakeSite
from own_plugins import ours_only

ROOT = Path(__file__).resolve().parents[2]
H100 = ROOT / "examples" / "nodes" / "nvidia-h100-1gpu"
SKIPPED = (
    "plugin 'akbroken' (akbroken 1.0) was skipped: import failed: RuntimeError: boom at import"
)


@pytest.fixture
def broken_site(tmp_path: Path) -> Path:
    """A site with a distribution whose ``accelkit`` entry point raises when imported."""
    site = FakeSite(tmp_path / "site")
    site.path.mkdir()
    site.add(
        "akbroken",
        {"akbroken": "akbroken"},
        {"akbroken": "raise RuntimeError('boom at import')\n"},
    )
    return site.path


@pytest.mark.parametrize(
    "argv",
    [
        ["env", "-r", "GPU=1"],
        ["run", "-r", "GPU=1", "--", "true"],
        ["resources"],
        ["verify"],
        ["snapshot", "{tmp}/snap"],
    ],
    ids=lambda argv: argv[0],
)
def test_every_verb_says_a_plugin_warning_in_one_line(
    argv: list[str], broken_site: Path, tmp_path: Path
) -> None:
    words = [word.format(tmp=tmp_path) for word in argv]
    done = subprocess.run(
        [sys.executable, "-m", "accelkit.cli", words[0], "--host", str(H100), *words[1:]],
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(broken_site), os.environ.get("PYTHONPATH", "")]),
            "ACCELKIT_LEDGER": str(tmp_path / "ledger.json"),
        },
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if "akbroken" in line]
    assert warnings == [f"accelkit {words[0]}: warning: {SKIPPED}"], done.stderr
    assert "Warning:" not in done.stderr and ".py:" not in done.stderr


@pytest.mark.parametrize("json_output", [False, True], ids=["listing", "json"])
def test_ls_lists_a_skipped_plugin_as_an_error_of_the_node(
    json_output: bool, broken_site: Path
) -> None:
    """``accelkit ls --json``, what a scheduler reads, never said a plugin had failed to load
    (its families undetected); the listing said only the plugin's name. Both now carry the
    error, with why, among the node's diagnostics."""
    done = subprocess.run(
        [sys.executable, "-m", "accelkit.cli", "ls", "--host", str(H100)]
        + (["--json"] if json_output else []),
        capture_output=True,
        text=True,
        env=ours_only(
            {
                **os.environ,
                "PYTHONPATH": f"{broken_site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
            }
        ),
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "akbroken" not in done.stderr
    if json_output:
        errors = [d for d in json.loads(done.stdout)["diagnostics"] if d["level"] == "error"]
        assert errors == [{"family": "accelkit", "level": "error", "message": SKIPPED}]
    else:
        assert f"  error   accelkit: {SKIPPED}" in done.stdout.splitlines()


NOISY = """
import os, sys
from accelkit import AcceleratorManager, Device, hookimpl

print("echo SPOKEN-AT-IMPORT")
os.write(1, b"echo WRITTEN-AT-IMPORT\\n")

class Manager(AcceleratorManager):
    name = "noisy"
    resource_name = "NOISY"
    visible_devices_env_var = "NOISY_VISIBLE_DEVICES"
    api_version = 2

    def detect(self, host):
        print("echo SPOKEN-IN-DETECT")
        sys.stdout.flush()
        os.write(1, b"echo WRITTEN-IN-DETECT\\n")
        return [Device("0", 0)]

@hookimpl
def accelkit_register_managers():
    return [Manager()]
"""


@pytest.mark.parametrize(
    "argv",
    [
        ["env", "-r", "NOISY=1"],
        ["ls", "--json"],
        ["resources", "--format", "json"],
        ["plugins", "--json"],
    ],
    ids=lambda argv: argv[0],
)
def test_what_a_plugin_prints_never_reaches_the_output_a_program_reads(
    argv: list[str], tmp_path: Path
) -> None:
    """``eval "$(accelkit env ...)"`` ran what a plugin (or its vendor library) printed to
    stdout while it was imported or detected, outside the vendor imports already caught; a
    JSON reader got text before the JSON. It goes to stderr, for the person."""
    site = FakeSite(tmp_path / "site")
    site.path.mkdir()
    site.add("aknoisy", {"noisy": "aknoisy"}, {"aknoisy": NOISY})
    done = subprocess.run(
        [sys.executable, "-m", "accelkit.cli", *argv, "--host", str(H100)],
        capture_output=True,
        text=True,
        env=ours_only(
            {
                **os.environ,
                "PYTHONPATH": os.pathsep.join([str(site.path), os.environ.get("PYTHONPATH", "")]),
                "ACCELKIT_LEDGER": str(tmp_path / "ledger.json"),
            }
        ),
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "SPOKEN" not in done.stdout and "WRITTEN" not in done.stdout, done.stdout
    for said in ("SPOKEN-AT-IMPORT", "WRITTEN-AT-IMPORT", "SPOKEN-IN-DETECT", "WRITTEN-IN-DETECT"):
        assert said in done.stderr
    if argv[0] == "env":
        assert done.stdout == "export NOISY_VISIBLE_DEVICES=0\n"


@pytest.mark.parametrize(
    "verb",
    [["env", "-r", "GPU=8"], ["resources"], ["run", "-r", "GPU=8", "--", "true"]],
    ids=lambda v: v[0],
)
def test_an_exclusion_that_is_malformed_or_matches_nothing_is_said_where_devices_are_named(
    verb: list[str], tmp_path: Path
) -> None:
    """A typo in ``ACCELKIT_EXCLUDE_DEVICES`` (``amd=3``, an unknown UUID) kept the broken GPU
    the operator meant to exclude in every grant and export, and only ``ls`` said so. ``run``
    too: its ledger's node is detected with the exclusions lifted."""
    amd = ROOT / "examples" / "nodes" / "amd-mi300x-8gpu"
    ledger = ["--ledger", str(tmp_path / "ledger.json")] if verb[0] == "run" else []
    done = subprocess.run(
        [sys.executable, "-m", "accelkit.cli", verb[0], "--host", str(amd), *ledger, *verb[1:]],
        capture_output=True,
        text=True,
        env=ours_only({**os.environ, "ACCELKIT_EXCLUDE_DEVICES": "amd=3,amd:GPU-deadbeef"}),
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if ": warning: " in line]
    assert said == [
        f"accelkit {verb[0]}: warning: ACCELKIT_EXCLUDE_DEVICES entry 'amd=3' is not "
        "family:device (e.g. nvidia:GPU-… or nvidia:3); ignoring it",
        f"accelkit {verb[0]}: warning: ACCELKIT_EXCLUDE_DEVICES names amd:GPU-deadbeef, which "
        "matches no device",
    ]


@pytest.mark.parametrize(
    ("argv", "variables", "said"),
    [
        (["ls", "--host", str(H100)], {}, "  error   accelkit: plugin 'akescape' (akescape 1.0)"),
        (["check", "akescape"], {}, "          plugin 'akescape' (akescape 1.0) is not in use"),
        (
            ["plugins"],
            {"ACCELKIT_REQUIRE_PLUGINS": "akescape"},
            "accelkit plugins: ACCELKIT_REQUIRE_PLUGINS names plugins that are not in use",
        ),
    ],
    ids=["ls", "check", "plugins-required"],
)
def test_a_plugins_error_text_is_printed_with_its_control_characters_escaped(
    argv: list[str], variables: dict[str, str], said: str, tmp_path: Path
) -> None:
    """``accelkit ls`` (its diagnostics), ``check`` (its report) and ``plugins`` (a required
    plugin's error) printed what a plugin raised as it was: an escape sequence reached the
    terminal. ``plugins``' table and the verbs' warnings escaped it already."""
    site = FakeSite(tmp_path / "site")
    site.path.mkdir()
    site.add(
        "akescape", {"akescape": "akescape"}, {"akescape": 'raise RuntimeError("boom \\x1b[31m")\n'}
    )
    done = subprocess.run(
        [sys.executable, "-m", "accelkit.cli", *argv],
        capture_output=True,
        text=True,
        env=ours_only(
            {
                **os.environ,
                **variables,
                "PYTHONPATH": os.pathsep.join([str(site.path), os.environ.get("PYTHONPATH", "")]),
            }
        ),
        timeout=120,
    )
    output = done.stdout + done.stderr
    assert "\x1b" not in output
    (line,) = [line for line in output.splitlines() if line.startswith(said)]
    assert line.endswith("RuntimeError: boom \\x1b[31m")
