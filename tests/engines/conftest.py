"""Every engine test gets a ledger of its own (``$ACCELKIT_LEDGER`` in a temporary directory),
and, as every test, no inherited visibility variable (tests/conftest.py): the clusters and Ray
workers they start take their devices from that ledger, never from the machine's per-user one,
whatever the machine has.

The clusters run recorded nodes, not this machine, so distributed's own GPU diagnostics are off
(:func:`no_gpu_diagnostics`): on a machine with NVIDIA GPUs a worker asks NVML for the handle of
the GPU its ``CUDA_VISIBLE_DEVICES`` names, ``2`` of a recorded 8-GPU node on a machine of one,
and fails to start (``NVMLError_InvalidArgument``, seen on an H100; tests/test_any_machine.py
runs these tests on a simulated machine of one GPU)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def own_ledger(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    path = tmp_path / "ledger.json"
    monkeypatch.setenv("ACCELKIT_LEDGER", str(path))
    return path


@pytest.fixture(autouse=True)
def no_gpu_diagnostics(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """distributed's NVML diagnostics off: in the processes a test starts (the variable) and in
    this one, whose configuration a nanny hands to the workers it starts (``dask.config``)."""
    monkeypatch.setenv("DASK_DISTRIBUTED__DIAGNOSTICS__NVML", "False")
    try:
        import dask.config
    except ImportError:  # the Ray tests need no dask
        yield
        return
    with dask.config.set({"distributed.diagnostics.nvml": False}):
        yield
