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

import pytest

pytestmark = pytest.mark.engine

pytest.importorskip("ray")

SESSION = Path(__file__).with_name("ray_session.py")


def loopback_namespace() -> list[str]:
    """The command prefix that runs a command in a new network namespace with only ``lo`` up,
    or a skip saying why it cannot be made here."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.skip("needs unshare(1) and ip(8) to make a loopback-only network namespace")
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot make a network namespace (unshare -n): {probe.stderr.strip()}")
    return ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh"]


def test_ray_tasks_of_an_unknown_family_each_see_their_own_card(tmp_path: Path) -> None:
    # Ray's socket paths must stay under 108 bytes: a short session directory of its own.
    with tempfile.TemporaryDirectory(prefix="ray-") as ray_tmp:
        env = {
            **os.environ,
            "RAY_USAGE_STATS_ENABLED": "0",
            "RAY_AUTH_MODE": "disabled",  # no token written to ~/.ray for a throwaway node
            "RAY_TMPDIR": ray_tmp,
            "ACCELKIT_OVERRIDE_RESOURCES": '{"GPU": 2, "ACME": 2}',
            "ACCELKIT_LEDGER": str(tmp_path / "ledger.json"),
        }
        env.pop("ACME_VISIBLE_DEVICES", None)
        result = subprocess.run(
            [*loopback_namespace(), sys.executable, str(SESSION), str(tmp_path)],
            capture_output=True,
            text=True,
            env=env,
            timeout=240,
        )
    assert result.returncode == 0, result.stderr[-4000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
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


def test_families_ray_knows_stay_rays_and_the_others_go_to_the_ledger() -> None:
    from accelkit.integrations.ray import split_request

    assert split_request({"GPU": 1, "ACME": 2, "accelerator_type:ACME-Rocket-X1": 0.001}) == (
        {"num_gpus": 1, "resources": {"ACME": 2, "accelerator_type:ACME-Rocket-X1": 0.001}},
        {"ACME": 2},
        "ACME-Rocket-X1",
    )
    # Ray picks the ids of its own families: nothing for the ledger, the type stays Ray's.
    assert split_request({"neuron_cores": 2, "accelerator_type:aws-neuron-core": 0.001}) == (
        {"resources": {"neuron_cores": 2, "accelerator_type:aws-neuron-core": 0.001}},
        {},
        None,
    )
    with pytest.raises(ValueError, match="one accelerator type per request"):
        split_request({"ACME": 1, "accelerator_type:a": 0.001, "accelerator_type:b": 0.001})
