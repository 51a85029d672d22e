"""Plugins for the whole test tree. pytest only honours ``pytest_plugins`` in a top-level
conftest, so pytester (used by tests/kit to run the conformance suite as a plugin author would)
is enabled here; it only adds fixtures."""

from __future__ import annotations

import pathlib
import subprocess
import sys
from typing import Any

import pytest
from vendor_wrappers import AMDSMI_LATEST, Fetch

pytest_plugins = ["pytester"]


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
