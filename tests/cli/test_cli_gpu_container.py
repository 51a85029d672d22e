"""The CLI in a GPU container: ``NVIDIA_VISIBLE_DEVICES=all`` (set in every one) and
``CUDA_VISIBLE_DEVICES=0`` in the shell change nothing a command says about a replayed node.

Those variables describe the machine the shell runs on; ``--host DIR`` replays another one, with
the vendor variables it recorded. Each command runs as a person runs it, in a fresh process,
once in a clean shell and once in the container's, and must print the same thing.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

NODES = Path(__file__).resolve().parents[2] / "examples" / "nodes"
CONTAINER = {"NVIDIA_VISIBLE_DEVICES": "all", "CUDA_VISIBLE_DEVICES": "0"}
SHOW = 'echo "$CUDA_VISIBLE_DEVICES $CUDA_DEVICE_ORDER"'
COMMANDS = {
    "ls": ["ls", "--host", "{nodes}/nvidia-h100-8gpu"],
    "ls --json": ["ls", "--json", "--host", "{nodes}/nvidia-h100-8gpu"],
    "ls -v (real H100)": ["ls", "-v", "--host", "{nodes}/nvidia-h100-1gpu"],
    "ls (mixed)": ["ls", "--host", "{nodes}/mixed-nvidia-ascend"],
    "env": ["env", "-r", "GPU=2", "--host", "{nodes}/nvidia-h100-8gpu"],
    "env --json": ["env", "--json", "-r", "GPU=0.5", "--host", "{nodes}/nvidia-h100-8gpu"],
    "env --hide-others": [
        *("env", "-r", "NPU=1", "--hide-others"),
        *("--host", "{nodes}/mixed-nvidia-ascend"),
    ],
    "resources": ["resources", "--format", "json", "--host", "{nodes}/nvidia-h100-8gpu"],
    "run": [
        *("run", "-r", "GPU=3", "--ledger", "{tmp}/ledger.json"),
        *("--host", "{nodes}/nvidia-h100-8gpu", "--", "sh", "-c", SHOW),
    ],
}


def accelkit(argv: list[str], tmp: Path, extra: dict[str, str]) -> tuple[int, str, str]:
    """``accelkit ARGV`` in a fresh process: a shell without accelkit's or the vendors'
    visibility variables, plus ``extra``; grant tokens and paths in its output made comparable."""
    shell = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("ACCELKIT_") and not name.endswith("_VISIBLE_DEVICES")
    }
    args = [a.replace("{nodes}", str(NODES)).replace("{tmp}", str(tmp)) for a in argv]
    result = subprocess.run(
        [sys.executable, "-m", "accelkit.cli", *args],
        capture_output=True,
        text=True,
        env={**shell, **extra},
        timeout=120,
    )
    out = re.sub(r'"token": \d+', '"token": 0', result.stdout)  # each grant's own
    return result.returncode, out, result.stderr.replace(str(tmp), "TMP")


@pytest.mark.parametrize("name", COMMANDS)
def test_the_containers_variables_change_nothing_on_a_replayed_node(
    name: str, tmp_path: Path
) -> None:
    (tmp_path / "clean").mkdir()
    (tmp_path / "container").mkdir()
    clean = accelkit(COMMANDS[name], tmp_path / "clean", {})
    container = accelkit(COMMANDS[name], tmp_path / "container", CONTAINER)
    assert clean[0] == 0, clean
    assert container == clean


def test_run_hands_its_command_the_grant_not_the_shells_gpu(tmp_path: Path) -> None:
    """The command sees the granted GPUs; the container layer it inherits is left as it was."""
    show = 'echo "$CUDA_VISIBLE_DEVICES ${NVIDIA_VISIBLE_DEVICES-unset}"'
    argv = [*COMMANDS["run"][:-1], show]
    code, out, err = accelkit(argv, tmp_path, CONTAINER)
    assert code == 0, err
    assert out == "0,1,2 all\n"
