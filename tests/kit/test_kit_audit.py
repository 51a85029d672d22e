"""The audit hook: what it flags and blocks during detection, and what it leaves alone."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import multiprocessing
import os
import shutil
import socket
import subprocess
import sys
import types
from pathlib import Path

import pytest
from accelkit import FakeHost
from accelkit.testing._audit import Forbidden, ForbiddenImport, watching


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


def test_importlib_and_already_imported_vendor_libraries_are_blocked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # importlib.import_module raises no "import" audit event, and a module already in
    # sys.modules raises none either: both must still be caught.
    stand_in = types.ModuleType("amdsmi")
    monkeypatch.setitem(sys.modules, "amdsmi", stand_in)
    with watching(FakeHost()) as audit:
        with pytest.raises(ForbiddenImport):
            importlib.import_module("dpctl")
        with pytest.raises(ForbiddenImport):
            import amdsmi  # type: ignore[import-not-found]  # noqa: F401
        with pytest.raises(ForbiddenImport):
            importlib.util.find_spec("torch")
    assert [(v.kind, v.target) for v in audit.events] == [
        ("library", "dpctl"),
        ("library", "amdsmi"),
        ("library", "torch"),
    ]
    assert sys.modules["amdsmi"] is stand_in  # hidden only while the audit ran


def test_path_tests_without_audit_events_are_caught(tmp_path: Path) -> None:
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "acme0").write_text("")
    host = FakeHost(root=tmp_path)
    with watching(host) as audit:
        assert host.exists("/dev/acme0") and host.glob("/dev/acme*") == ["/dev/acme0"]
        assert os.path.exists(tmp_path / "dev" / "acme0")  # inside the root: fine
        assert audit.events == []
        assert not os.path.exists("/dev/null")  # blocked: looks absent
        with pytest.raises(Forbidden):
            os.readlink("/proc/self/exe")
        assert shutil.which("nvidia-smi") is None
        with pytest.raises(Forbidden):
            os.stat(os.path.join(sys.base_prefix, "bin"))  # a prefix is not an import root
    shown = [str(v) for v in audit.events]
    assert shown[:2] == ["os.stat(/dev/null)", "os.readlink(/proc/self/exe)"]
    assert "os.environ['PATH']" in shown  # shutil.which reads PATH, then stats each entry
    assert any(s.startswith("os.stat(") and s.endswith("/nvidia-smi)") for s in shown)
    assert shown[-1] == f"os.stat({os.path.join(sys.base_prefix, 'bin')})"


def test_reading_os_environ_is_recorded_not_blocked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACCELKIT_AUDIT_PROBE", "7")
    with watching(FakeHost(env={"ACCELKIT_AUDIT_PROBE": "1"})) as audit:
        assert os.environ["ACCELKIT_AUDIT_PROBE"] == "7"
        assert os.getenv("ACCELKIT_AUDIT_UNSET") is None
        _ = "HOME" in os.environ  # a membership test is a read too
    assert [str(v) for v in audit.events] == [
        "os.environ['ACCELKIT_AUDIT_PROBE']",
        "os.environ['ACCELKIT_AUDIT_UNSET']",
        "os.environ['HOME']",
    ]
    assert {v.kind for v in audit.events} == {"environment"}
    assert not any(v.blocked for v in audit.events)


def test_changes_are_blocked_even_inside_the_root_and_the_import_roots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    with watching(FakeHost(root=tmp_path)) as audit:
        with pytest.raises(Forbidden):
            open(tmp_path / "written", "w")  # noqa: SIM115
        with pytest.raises(Forbidden):
            os.mkdir(tmp_path / "made")
        with pytest.raises(Forbidden):
            os.open(tmp_path / "created", os.O_CREAT | os.O_WRONLY)
    assert [v.event for v in audit.events] == ["open for writing", "os.mkdir", "open for writing"]
    assert os.listdir(tmp_path) == []


def test_the_import_system_may_read_modules_data_and_write_bytecode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "auditpkg"
    package.mkdir()
    (package / "__init__.py").write_text("X = 1\n")
    (package / "ids.json").write_text("{}")  # a plugin's own data file
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    with watching(FakeHost()) as audit:
        module = importlib.import_module("auditpkg")
        assert (package / "ids.json").read_text() == "{}"
    assert module.X == 1 and audit.events == []
    assert list((package / "__pycache__").iterdir())  # bytecode was written, and allowed


def test_a_package_first_imported_in_an_audit_stays_importable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An editable install maps a package outside sys.path (accelkit_plugins, in a checkout): its
    directory is no import root, and importlib lists it to find a submodule. Blocked, that
    listing was cached as empty, and the submodules stayed unimportable after the audit."""
    package = tmp_path / "mappedpkg"
    package.mkdir()
    for name in ("__init__", "inside", "after"):
        (package / f"{name}.py").write_text("X = 1\n")

    class Mapped(importlib.abc.MetaPathFinder):
        def find_spec(self, name: str, path: object, target: object = None) -> object:
            if name != "mappedpkg":
                return None
            init, search = package / "__init__.py", [str(package)]
            return importlib.util.spec_from_file_location(
                name, init, submodule_search_locations=search
            )

    monkeypatch.setattr(sys, "meta_path", [Mapped(), *sys.meta_path])
    for name in ("mappedpkg", "mappedpkg.inside", "mappedpkg.after"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    with watching(FakeHost()) as audit:
        assert importlib.import_module("mappedpkg.inside").X == 1
    assert audit.events == []
    assert importlib.import_module("mappedpkg.after").X == 1


@pytest.mark.usefixtures("only_our_plugins")  # one the machine has may fail to load, as it would
def test_the_audit_fixture_records_only_the_plugins_own_doing(pytester: pytest.Pytester) -> None:
    """In a fresh process, as a plugin author runs it: the registry's first use (its variables,
    every plugin's import) is accelkit's, not the plugin's, and must not break later tests."""
    pytester.makepyfile(
        test_acme="""
        import accelkit

        def test_detect(accelkit_hosts, accelkit_audit):
            host = accelkit_hosts("acme", 2)
            with accelkit_audit(host) as audit:
                devices = accelkit.get_manager("acme").detect(host)
            assert len(devices) == 2
            assert not audit.events, audit.summary()

        def test_a_registry_of_its_own(accelkit_hosts, accelkit_audit):
            host = accelkit_hosts("acme", 1)
            mine = accelkit.Registry()
            with accelkit_audit(host, registry=mine) as audit:
                devices = mine.get_manager("acme").detect(host)
            assert len(devices) == 1 and not audit.events, audit.summary()

        def test_the_builtins_still_load_after():
            broken = [(p.name, p.error) for p in accelkit.plugin_report() if p.status == "error"]
            assert broken == []
        """
    )
    result = pytester.runpytest_subprocess("-p", "accelkit.testing", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)


def test_opening_a_socket_is_blocked() -> None:
    with watching(FakeHost()) as audit, pytest.raises(Forbidden):
        socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    assert [(v.kind, v.event) for v in audit.events] == [("network", "socket.__new__")]


def test_everything_is_put_back_after_an_audit() -> None:
    before = (os.stat, os.lstat, os.access, os.readlink, type(os.environ._data))  # type: ignore[attr-defined]
    meta_path = list(sys.meta_path)
    with watching(FakeHost()):
        assert os.stat is not before[0]
    after = (os.stat, os.lstat, os.access, os.readlink, type(os.environ._data))  # type: ignore[attr-defined]
    assert after == before and sys.meta_path == meta_path


def test_multiprocessing_is_a_process_too() -> None:
    # the spawn start method calls _posixsubprocess.fork_exec directly, with no audit event
    with watching(FakeHost()) as audit, pytest.raises(Forbidden):
        multiprocessing.get_context("spawn").Process(target=os.getpid).start()
    assert audit.events and {v.kind for v in audit.events} == {"process"}


def test_a_bytecode_cache_prefix_is_the_import_systems_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "prefixed_module.py").write_text("Y = 2\n")
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "cache"))
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    with watching(FakeHost()) as audit:
        assert importlib.import_module("prefixed_module").Y == 2
    assert audit.events == []
    assert list((tmp_path / "cache").rglob("*.pyc"))
