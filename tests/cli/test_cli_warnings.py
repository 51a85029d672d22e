"""Warnings (a broken third-party plugin, ...) reach the user as the verbs' errors do: one line
on stderr, ``accelkit VERB: warning: ...``, never Python's file, line and source line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from fake_dists import FakeSite

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
