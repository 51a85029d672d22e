"""The audit hook: what it flags and blocks during detection, and what it leaves alone."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from accelkit import FakeHost
from accelkit.testing.audit import Forbidden, ForbiddenImport, watching


def test_reads_inside_the_root_are_allowed(tmp_path: Path) -> None:
    (tmp_path / "sys").mkdir()
    (tmp_path / "sys" / "model").write_text("X1\n")
    host = FakeHost(root=tmp_path)
    with watching(host) as audit:
        assert host.read_text("/sys/model") == "X1\n"
        assert host.listdir("/sys") == ["model"]
        assert host.glob("/sys/*") == ["/sys/model"]
    assert audit.events == []


def test_machine_files_outside_the_root_are_blocked_and_recorded(tmp_path: Path) -> None:
    with watching(FakeHost(root=tmp_path)) as audit:
        with pytest.raises(Forbidden, match="/proc/cpuinfo"):
            open("/proc/cpuinfo")  # noqa: SIM115
        with pytest.raises(Forbidden):
            os.listdir("/dev")
    assert [(v.kind, v.event, v.target) for v in audit.events] == [
        ("file", "open", "/proc/cpuinfo"),
        ("file", "os.listdir", "/dev"),
    ]


def test_python_imports_are_allowed() -> None:
    sys.modules.pop("email.mime.audio", None)
    with watching(FakeHost()) as audit:
        import email.mime.audio  # noqa: F401
    assert audit.events == []


def test_processes_network_and_environment_changes_are_blocked() -> None:
    with watching(FakeHost()) as audit:
        with pytest.raises(Forbidden):
            subprocess.run(["true"])
        with pytest.raises(Forbidden):
            socket.getaddrinfo("metadata.google.internal", 80)
        with pytest.raises(Forbidden):
            os.environ["ACCELKIT_AUDIT_PROBE"] = "1"
    assert [v.kind for v in audit.events] == ["process", "network", "environment"]
    assert "ACCELKIT_AUDIT_PROBE" not in os.environ


def test_direct_vendor_imports_are_blocked_even_when_not_installed() -> None:
    with watching(FakeHost()) as audit, pytest.raises(ForbiddenImport):
        import pynvml  # type: ignore[import-not-found]  # noqa: F401
    assert [(v.kind, v.target) for v in audit.events] == [("library", "pynvml")]


def test_the_hook_is_idle_outside_an_audit(tmp_path: Path) -> None:
    with watching(FakeHost(root=tmp_path)):
        pass
    assert os.path.isdir("/dev") and os.listdir("/dev") is not None


def test_audits_do_not_nest() -> None:
    with watching(FakeHost()), pytest.raises(RuntimeError, match="nest"), watching(FakeHost()):
        pass
