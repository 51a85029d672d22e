"""Fixtures for plugin authors' tests: opt in with ``pytest -p accelkit.testing`` or
``pytest_plugins = ["accelkit.testing"]`` in a conftest. Never autoloaded (no ``pytest11``
entry point), so installing accelkit changes no other project's test run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Callable, Optional

import pytest

from accelkit.host import Host
from accelkit.registry import Registry, resolve
from accelkit.testing._audit import Audit, watching
from accelkit.testing.fakes import host_builder

HostMaker = Callable[[str, int], Host]
AuditContext = Callable[..., "contextlib.AbstractContextManager[Audit]"]


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
    the block makes outside ``host``; then ``assert not audit.events``.

    Takes :func:`~accelkit.testing._audit.watching`'s ``libraries`` (the plugin's own vendor
    modules), and ``registry``: the plugins the block uses (None: the default registry). That
    registry is loaded before recording starts, as its first use reads accelkit's own variables
    (``ACCELKIT_DISABLE_PLUGINS``, ...) and imports every plugin: accelkit's doing, not the
    code under test's, and loaded inside the audit it would be recorded against that code.
    """

    @contextlib.contextmanager
    def audit(
        host: Host, libraries: Iterable[str] = (), registry: Optional[Registry] = None
    ) -> Iterator[Audit]:
        resolve(registry).report()
        with watching(host, libraries) as found:
            yield found

    return audit
