"""Tests must not depend on the machine nor the job they run in: part of the suite runs again on
a machine with the accelerators of six families (simulated: tests/support/simulated_machine.py)
and a third-party plugin that fails to load, from a shell inside a job.

CI's machines have no accelerator and no job's variables, so a test that assumed either passed
there and failed on a GPU machine (the Ray test saw the machine's H100 as a resource, Dask
workers asked the machine's NVML for a recorded node's GPU 2). The tests chosen start processes
that detect the machine they run on: the CLI, the example scripts, the pool and the engines; and
processes that list or check the plugins installed, or whose every line is pinned, which a
vendor's plugin whose import raises (an error of every node, a warning of every verb, exit
status 1 of ``accelkit plugins``) failed on a machine that had one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from fake_dists import FakeSite
from simulated_machine import simulated_machine

ROOT = Path(__file__).resolve().parents[1]

A_SHELL_INSIDE_A_JOB = {
    "ACCELKIT_OVERRIDE_RESOURCES": '{"GPU": 1}',
    "ACCELKIT_EXCLUDE_DEVICES": "nvidia:1",
    "ACCELKIT_DISABLE_PLUGINS": "tpu",
    "CUDA_VISIBLE_DEVICES": "0",
    "NEURON_RT_VISIBLE_CORES": "0-3",
    "HABANA_VISIBLE_MODULES": "0,1",
}
"""An operator's node-wide accelkit settings and a job's visibility variables."""

THE_TESTS = [  # each starts processes that detect the machine, or replays nodes beside it
    "tests/plugins/test_node_snapshots.py::test_accelkit_ls_shows_the_node",
    "tests/plugins/test_layer_failures.py",
    "tests/cli/test_cli_gpu_container.py",
    "tests/scaling/test_scaling.py",
    "tests/pool/test_pool_parent.py",
    "tests/engines/test_dask.py",
    "tests/engines/test_ray.py",
    # each lists, checks or pins what every plugin installed says (tests/support/own_plugins.py)
    "tests/cli/test_cli_warnings.py",
    "tests/registry/test_registry_cli.py",
    "tests/kit/test_kit_audit.py::test_the_audit_fixture_records_only_the_plugins_own_doing",
    "tests/kit/test_kit_guide.py::test_a_built_in_replaced_as_the_guide_shows",
]

A_VENDOR_PLUGIN_THAT_DOES_NOT_LOAD = (
    "raise ImportError('libvendor.so.1: cannot open shared object file')\n"
)
"""A third-party plugin installed on the machine whose vendor library is missing."""


@pytest.fixture
def machine(tmp_path: Path) -> dict[str, str]:
    """The variables of a process on a machine with one NVIDIA GPU and the example nodes' AMD,
    Intel, Neuron, Gaudi and Ascend devices: one GPU, so that a recorded node's GPU 2 is not
    there."""
    try:
        return simulated_machine(tmp_path / "machine", nvidia_gpus=1)
    except ImportError as exc:
        pytest.skip(f"{exc} (the test extra installs it)")


def test_the_simulated_machine_has_every_familys_devices(machine: dict[str, str]) -> None:
    """The machine the next test runs on is one that detection finds accelerators on."""
    result = subprocess.run(
        [sys.executable, "-m", "accelkit.cli", "ls", "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, **machine},
        timeout=120,
        check=True,
    )
    node = json.loads(result.stdout)
    families = Counter(device["family"] for device in node["devices"])
    simulated = {"nvidia": 1, "amd": 8, "intel": 8, "neuron": 32, "gaudi": 8, "ascend": 8}
    assert {family: families[family] for family in simulated} == simulated
    assert {device["source"] for device in node["devices"] if device["family"] == "nvidia"} == {
        "library"
    }


def test_the_simulated_nvml_errors_cross_processes_as_the_real_ones_do(
    machine: dict[str, str],
) -> None:
    """A Dask worker's NVML error reaches its nanny pickled, as ``pynvml``'s: the real wrapper's
    error classes are attributes of ``pynvml``, and so are the simulated machine's."""
    script = (
        "import pickle, pynvml; pynvml.nvmlInit(); "
        "error = pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT); "
        "print(type(pickle.loads(pickle.dumps(error))).__qualname__, pynvml.nvmlDeviceGetCount())"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, **machine},
        timeout=60,
        check=True,
    )
    assert result.stdout.split() == ["NVMLError_InvalidArgument", "1"]


def test_the_suite_runs_alike_on_a_machine_with_accelerators_inside_a_job(
    machine: dict[str, str], tmp_path: Path
) -> None:
    """tests/conftest.py clears the shell's variables before collection, and every test that
    detects the machine names the node it means. Without the clearing these tests fail here (the
    override shows in every replayed node, a disabled family breaks collection, the exclusion and
    the job's variables narrow what the tests expect); without distributed's NVML diagnostics
    turned off (tests/engines/conftest.py) the Dask workers of a recorded node's GPUs 2 and 3 do
    not start. Without tests/support/own_plugins.py the installed plugin that does not load
    fails the tests that pin a verb's exit status or every line it says. The operator's ledger
    is never touched."""
    operator_ledger = tmp_path / "operator-ledger.json"
    site = FakeSite(tmp_path / "site")
    site.path.mkdir()
    site.add(
        "vendorstack",
        {"vendorstack": "vendorstack"},
        {"vendorstack": A_VENDOR_PLUGIN_THAT_DOES_NOT_LOAD},
    )
    env = {
        **os.environ,
        **machine,
        **A_SHELL_INSIDE_A_JOB,
        "ACCELKIT_LEDGER": str(operator_ledger),
        "PYTHONPATH": os.pathsep.join([str(site.path), machine["PYTHONPATH"]]),
    }
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *THE_TESTS],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-4000:]
    assert " passed" in result.stdout.splitlines()[-1]
    assert not operator_ledger.exists()
