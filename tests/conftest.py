"""Plugins and fixtures for the whole test tree. pytest only honours ``pytest_plugins`` in a
top-level conftest, so pytester (used by tests/kit to run the conformance suite as a plugin author
would) is enabled here; it only adds fixtures. The session runs without what the shell running
it says about accelerators (:func:`pytest_configure`)."""

from __future__ import annotations

import importlib
import os
import pathlib
import subprocess
import sys
from typing import Any

import pytest
from accelkit.registry._contract import variables_read
from accelkit.registry._loading import BUILTIN_PLUGINS
from own_plugins import ours_only
from vendor_wrappers import AMDSMI_LATEST, Fetch

pytest_plugins = ["pytester"]


def _family_variables() -> frozenset[str]:
    """Every variable a built-in family reads (``NEURON_RT_VISIBLE_CORES``, ``ZE_AFFINITY_MASK``,
    ``CUDA_DEVICE_ORDER``, ...), as its manager declares them."""
    names: set[str] = set()
    for module in BUILTIN_PLUGINS:
        register = getattr(importlib.import_module(module), "accelkit_register_managers", None)
        if register is None:  # `hints` registers no family, only worker variables
            continue
        for manager in register():
            names.update(variables_read(manager))
    return frozenset(names)


FAMILY_VARIABLES = _family_variables()


def pytest_configure(config: pytest.Config) -> None:
    """Run the session without what the shell says about accelerators: accelkit's own settings
    (``ACCELKIT_*``: an operator's node-wide override, exclusions or ledger), every variable a
    built-in family reads and every ``*_VISIBLE_DEVICES`` (a third-party family's) leave the
    environment before collection, for the tests and for what they start. The suite must not
    depend on the machine it runs on, nor on the job it runs in; a test that needs one sets it."""
    for name in list(os.environ):
        if (
            name.startswith("ACCELKIT_")
            or name.endswith("_VISIBLE_DEVICES")
            or name in FAMILY_VARIABLES
        ):
            del os.environ[name]


@pytest.fixture
def only_our_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    """The processes this test starts, inheriting this one's environment, load no plugin that
    the machine happens to have beside this repository's (tests/support/own_plugins.py): for a
    test that pins a verb's exit status or every line it says."""
    for name, value in ours_only(os.environ).items():
        if os.environ.get(name) != value:
            monkeypatch.setenv(name, value)


@pytest.fixture(scope="session")
def fetch_release(request: pytest.FixtureRequest, tmp_path_factory: Any) -> Fetch:
    """``fetch(distribution, version)``: a directory holding that release, installed once per
    pytest cache (or per session with the cache off); the test is skipped when pip cannot."""
    cache = getattr(request.config, "cache", None)
    base = cache.mkdir("vendor-wrappers") if cache else tmp_path_factory.mktemp("wrappers")
    failures: dict[str, str] = {}

    def fetch(distribution: str, version: str) -> pathlib.Path:
        spec = f"{distribution}=={version}"
        target = pathlib.Path(base) / f"{distribution}-{version}"
        if spec not in failures and not (target / "COMPLETE").exists():
            argv = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps"]
            argv += ["--disable-pip-version-check", "--timeout", "20", "--retries", "1"]
            result = subprocess.run(
                [*argv, "--target", str(target), spec], capture_output=True, text=True
            )
            if result.returncode == 0:
                (target / "COMPLETE").write_text(spec)
            else:
                lines = (result.stderr or result.stdout).strip().splitlines() or ["no output"]
                failures[spec] = f"pip cannot install {spec}: {lines[-1]}"
        if spec in failures:
            pytest.skip(failures[spec])
        return target

    return fetch


@pytest.fixture(scope="session")
def amdsmi_dir(fetch_release: Fetch) -> pathlib.Path:
    """The latest amdsmi release's package directory (fetched once; skipped without pip)."""
    return fetch_release("amdsmi", AMDSMI_LATEST) / "amdsmi"
