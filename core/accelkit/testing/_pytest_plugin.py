"""Fixtures for plugin authors' tests: opt in with ``pytest -p accelkit.testing`` or
``pytest_plugins = ["accelkit.testing"]`` in a conftest. Never autoloaded (no ``pytest11``
entry point), so installing accelkit changes no other project's test run.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Callable

import pytest

from accelkit.host import Host
from accelkit.testing._audit import Audit, watching
from accelkit.testing.fakes import host_builder

HostMaker = Callable[[str, int], Host]
AuditContext = Callable[[Host], "contextlib.AbstractContextManager[Audit]"]


@pytest.fixture
def accelkit_hosts(tmp_path: Path) -> HostMaker:
    """``accelkit_hosts(family, count)``: a fake host with ``count`` devices of ``family``.

    Uses the family's builder registered in the ``accelkit.testing`` entry-point group (the
    built-ins' are there too); each call gets a fresh directory under ``tmp_path``.
    """
    made = 0

    def make(family: str, count: int) -> Host:
        nonlocal made
        made += 1
        root = tmp_path / f"{family}-{made}"
        root.mkdir()
        try:
            builder = host_builder(family)
        except LookupError as exc:
            pytest.fail(str(exc))
        return builder(count, root)

    return make


@pytest.fixture
def accelkit_audit() -> AuditContext:
    """``with accelkit_audit(host) as audit: ...``: record (and block) every access the code in
    the block makes outside ``host``; then ``assert not audit.events``."""
    return watching
