"""A real Ray node, in a loopback-only network namespace (Ray contacts outside addresses at
start otherwise) with usage stats off, runs tasks of a family Ray has never heard of: the
example plugin's ACME cards, counted by Ray as a custom resource from ``to_ray`` and handed out
by accelkit's node ledger inside the workers, also beside a GPU that Ray hands out itself."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, cast

import pytest

pytestmark = pytest.mark.engine

pytest.importorskip("ray")

SESSION = Path(__file__).with_name("ray_session.py")
MUSA_SESSION = Path(__file__).with_name("ray_musa_session.py")
MUSA_NODE = Path(__file__).resolve().parents[2] / "contrib/mthreads/nodes/mthreads-s4000-8"


def loopback_namespace() -> list[str]:
    """The command prefix that runs a command in a new network namespace with only ``lo`` up,
    or a skip saying why it cannot be made here."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.skip("needs unshare(1) and ip(8) to make a loopback-only network namespace")
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot make a network namespace (unshare -n): {probe.stderr.strip()}")
    return ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh"]


def run_session(script: Path, argument: Path, env: dict[str, str]) -> dict[str, Any]:
    """Run a session script on a throwaway Ray node in a loopback-only namespace, with ``env``
    added to this environment; what it printed last, as JSON."""
    # Ray's socket paths must stay under 108 bytes: a short session directory of its own.
    with tempfile.TemporaryDirectory(prefix="ray-") as ray_tmp:
        environment = {
            **os.environ,
            "RAY_USAGE_STATS_ENABLED": "0",
            "RAY_AUTH_MODE": "disabled",  # no token written to ~/.ray for a throwaway node
            "RAY_TMPDIR": ray_tmp,
            **env,
        }
        for watched in ("ACME_VISIBLE_DEVICES", "MUSA_VISIBLE_DEVICES"):  # not built-ins': kept
            environment.pop(watched, None)  # by tests/conftest.py, so cleared here
        result = subprocess.run(
            [*loopback_namespace(), sys.executable, str(script), str(argument)],
            capture_output=True,
            text=True,
            env=environment,
            timeout=240,
        )
    assert result.returncode == 0, result.stderr[-4000:]
    return cast("dict[str, Any]", json.loads(result.stdout.strip().splitlines()[-1]))


# A plugin failing to load in the workers would stop the calls that reserve a license: it may
# have been that plugin's resource (ray.py's _check_detected). Here, only our plugins load.
@pytest.mark.usefixtures("only_our_plugins")
def test_ray_tasks_of_an_unknown_family_each_see_their_own_card(tmp_path: Path) -> None:
    seen = run_session(
        SESSION,
        tmp_path,
        {
            "ACCELKIT_OVERRIDE_RESOURCES": '{"GPU": 2, "ACME": 2}',
            "ACCELKIT_LEDGER": str(tmp_path / "ledger.json"),
        },
    )
    # The cards are a custom resource and the GPUs Ray's own; whatever else this machine has
    # (``accelerator_type:H100``, a Gaudi's ``HPU``) is its own business: none on CI.
    resources = json.loads(seen["cluster_resources"])
    assert resources["ACME"] == 2
    assert "GPU" not in resources
    # Two tasks running at once (they wait for each other), each with its own card.
    assert sorted(task["acme"] for task in seen["first"]) == ["0", "1"]
    assert len({task["pid"] for task in seen["first"]}) == 2
    assert seen["held_after_tasks"] == 0  # each task gave its grant back
    # An actor holds its card for its life; a task beside it gets the other one.
    assert {seen["actor_sees"], seen["beside_actor"]["acme"]} == {"0", "1"}
    assert seen["held_with_actor"] == 1
    # GPU (Ray's, which narrows CUDA_VISIBLE_DEVICES in the worker) and ACME (the ledger's) in
    # one request: each task has one of each, and none re-detected a narrowed node.
    assert sorted((task["cuda"], task["acme"]) for task in seen["with_gpu"]) in (
        [("0", "0"), ("1", "1")],
        [("0", "1"), ("1", "0")],
    )
    # A license, a node pin, and a type pin of Ray's GPU are Ray's alone: beside a card, the
    # task gets its card; alone, no grant.
    for name in ("license", "gpu_type"):
        assert seen["beside_rays_own"][name]["acme"] in ("0", "1")
        assert seen["beside_rays_own"][name]["held"] == 1
    assert seen["beside_rays_own"]["license_alone"] == {"acme": None, "held": 0}
    # `.options(resources=...)` is what Ray reserves, and what the ledger grants: two cards.
    assert seen["options_task"] == {"acme": "0,1", "held": 1}
    assert seen["options_actor"] == "0,1"
    # A generator task streams, and holds its card until it is exhausted.
    assert len(seen["streamed"]) == 2
    assert seen["streamed"][0] == seen["streamed"][1]
    assert seen["streamed"][0]["acme"] in ("0", "1")
    assert seen["streamed"][0]["held"] == 1
    assert seen["held_after_stream"] == 0


def test_ray_gpus_of_a_family_ray_does_not_narrow_get_rays_ids_in_their_own_variable(
    tmp_path: Path,
) -> None:
    """Moore Threads GPUs are Ray's ``GPU``, but Ray writes only ``CUDA_VISIBLE_DEVICES``: each
    task still sees only the GPU Ray assigned it, through ``MUSA_VISIBLE_DEVICES``."""
    pytest.importorskip("accelkit_mthreads")
    snapshot = json.loads((MUSA_NODE / "snapshot.json").read_text())
    answer = tmp_path / "mthreads-gmi.json"
    answer.write_text(snapshot["commands"][0]["stdout"])
    tool = tmp_path / "bin" / "mthreads-gmi"
    tool.parent.mkdir()
    tool.write_text(f"#!/bin/sh\nexec cat {answer}\n")
    tool.chmod(0o755)
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    seen = run_session(
        MUSA_SESSION,
        barrier,
        {
            "PATH": f"{tool.parent}{os.pathsep}{os.environ['PATH']}",
            # Only the recorded node's GPUs: none of this machine's own.
            "ACCELKIT_DISABLE_PLUGINS": "nvidia,amd,intel,metax",
            "ACCELKIT_LEDGER": str(tmp_path / "ledger.json"),
        },
    )
    assert seen["to_ray"][0] == "--num-gpus=8"
    assert sorted(task["musa"] for task in seen["tasks"]) == ["0", "1"]
    for task in seen["tasks"]:
        assert task["ray"] == [task["musa"]]
