"""`accelkit run`, `ps` and `env` on a node where two families serve one resource: NVIDIA's and
AMD's GPUs are both ``GPU``, and both have a GPU 0, so what a grant holds is said with its
family."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from ledger_support import ROOT, run, start

NODES = ROOT / "examples" / "nodes"
HOLD = (
    'echo "$CUDA_VISIBLE_DEVICES|$ROCR_VISIBLE_DEVICES"; '
    'while [ ! -e "$0/go" ]; do sleep 0.02; done'
)


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A snapshot of a node with the example H100 node's 8 GPUs and the MI300X node's 8."""
    node = tmp_path_factory.mktemp("nvidia-amd")
    snapshot: dict = {}
    for name in ("nvidia-h100-8gpu", "amd-mi300x-8gpu"):
        recorded = json.loads((NODES / name / "snapshot.json").read_text())
        if snapshot:
            snapshot["commands"] += recorded["commands"]
            snapshot["env"].update(recorded["env"])
        else:
            snapshot = recorded
        shutil.copytree(NODES / name / "root", node / "root", symlinks=True, dirs_exist_ok=True)
    (node / "snapshot.json").write_text(json.dumps(snapshot))
    return str(node)


def hold(ledger: Path, request: str, mixed: str, folder: Path) -> tuple[subprocess.Popen[str], str]:
    """``accelkit run -r REQUEST`` holding its grant until ``folder/go`` exists, once it runs,
    and the ``CUDA_VISIBLE_DEVICES|ROCR_VISIBLE_DEVICES`` it was given."""
    folder.mkdir()
    holder = start(ledger, "run", "-r", request, "--host", mixed, "--", "sh", "-c", HOLD, folder)
    assert holder.stdout is not None
    return holder, holder.stdout.readline().strip()


def test_grants_holders_and_free_devices_are_said_with_their_family(
    tmp_path: Path, mixed: str
) -> None:
    ledger = tmp_path / "ledger.json"
    nvidia, seen = hold(ledger, "GPU=7", mixed, tmp_path / "nvidia")
    assert seen == "0,1,2,3,4,5,6|"
    amd, seen = hold(ledger, "GPU=2", mixed, tmp_path / "amd")  # one NVIDIA GPU left: AMD's serve
    assert seen == "|0,1"
    busy = run(ledger, "run", "-r", "GPU=8", "--host", mixed, "--", "true")
    assert f"nvidia GPU 0,1,2,3,4,5,6 held by pid {nvidia.pid}" in busy.stderr
    assert f"amd GPU 0,1 held by pid {amd.pid}" in busy.stderr
    holds = [line.split()[3:6] for line in run(ledger, "ps").stdout.splitlines()[2:]]
    assert holds == [["nvidia", "GPU", "0,1,2,3,4,5,6"], ["amd", "GPU", "0,1"]]
    listing = run(ledger, "ps", "--host", mixed)
    assert listing.stdout.splitlines()[-1] == "free: nvidia GPU 7; amd GPU 2,3,4,5,6,7"
    as_json = json.loads(run(ledger, "ps", "--host", mixed, "--json").stdout)
    assert as_json["free_by_family"] == {"nvidia": ["7"], "amd": ["2", "3", "4", "5", "6", "7"]}
    assert as_json["free"] == {"GPU": ["7", "2", "3", "4", "5", "6", "7"]}  # by resource
    assert [g["ids_by_family"] for g in as_json["grants"]] == [
        {"nvidia": ["0", "1", "2", "3", "4", "5", "6"]},
        {"amd": ["0", "1"]},
    ]
    shell = run(ledger, "env", "-r", "GPU=1", "--host", mixed)  # env takes NVIDIA's GPU 0
    assert f"(nvidia GPU 0 by pid {nvidia.pid} (sh -c" in shell.stderr  # what both name
    (tmp_path / "nvidia" / "go").touch()
    assert nvidia.wait(timeout=60) == 0
    assert "took nvidia GPU 0,1,2,3,4,5,6" in nvidia.stderr.read()  # type: ignore[union-attr]
    # Without --host, ps knows the node only from the grants it lists: AMD's alone are GPU 0,1
    # (its JSON's ids_by_family names them); with --host it names the family again.
    assert run(ledger, "ps").stdout.splitlines()[2].split()[3:5] == ["GPU", "0,1"]
    assert run(ledger, "ps", "--host", mixed).stdout.splitlines()[2].split()[3:6] == [
        "amd",
        "GPU",
        "0,1",
    ]
    (tmp_path / "amd" / "go").touch()
    assert amd.wait(timeout=60) == 0
    assert "took amd GPU 0,1\n" in amd.stderr.read()  # type: ignore[union-attr]
