"""LocalHost: commands with a time limit, library probes in a spawned process, files at /."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path

import probe_targets
import pytest
from accelkit.detect import call_probe, run_command
from accelkit.diagnostics import collecting
from accelkit.errors import ProbeError
from accelkit.host import LocalHost
from started_pids import record_started


def test_run_returns_exit_code_stdout_and_stderr() -> None:
    host = LocalHost()
    result = host.run([sys.executable, "-c", "import sys; print('out'); sys.exit(3)"])
    assert (result.returncode, result.stdout) == (3, "out\n")
    result = host.run([sys.executable, "-c", "import sys; sys.stderr.write('err')"], timeout=5)
    assert (result.returncode, result.stderr) == (0, "err")


def test_run_with_env_changes_only_the_command_s_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``env`` sets and removes variables for the program (tt-smi asked with
    ``TT_VISIBLE_DEVICES`` lifted), and leaves this process's environment alone."""
    monkeypatch.setenv("ACCELKIT_TEST_LIFTED", "2,3")
    show = "import os; print(os.environ.get('ACCELKIT_TEST_LIFTED'), os.environ.get('ADDED'))"
    argv = [sys.executable, "-c", show]
    assert LocalHost().run(argv).stdout == "2,3 None\n"
    lifted = LocalHost().run(argv, env={"ACCELKIT_TEST_LIFTED": None, "ADDED": "1"})
    assert lifted.stdout == "None 1\n"
    assert os.environ["ACCELKIT_TEST_LIFTED"] == "2,3" and "ADDED" not in os.environ


def test_run_of_a_missing_program_is_file_not_found() -> None:
    with pytest.raises(FileNotFoundError, match="accelkit-no-such-tool"):
        LocalHost().run(["accelkit-no-such-tool", "--version"])
    with pytest.raises(ValueError):
        LocalHost().run([])


def test_a_program_on_path_that_cannot_run_is_said_so_not_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A vendor tool without its x bit read as "not installed", a note only ``ls -v`` shows:
    it is a failure naming the file, at warning level."""
    tool = tmp_path / "accelkit-blocked-smi"
    tool.write_text("#!/bin/sh\necho 0\n")
    tool.chmod(0o644)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(PermissionError, match=f"{tool} is not executable"):
        LocalHost().run([tool.name])
    with collecting("acme") as notes:
        assert run_command(LocalHost(), [tool.name]) is None
    assert [(n.level, n.message) for n in notes] == [
        (
            "warning",
            f"`{tool.name}` failed: {tool} is not executable (its mode lacks x): it cannot run",
        )
    ]


def test_run_past_its_timeout_is_killed_quickly(monkeypatch: pytest.MonkeyPatch) -> None:
    """The command is known by the pid ``Popen`` gave: a shell of its own writing it would
    have to start within the 0.2 s, which a loaded machine need not grant."""
    started_pids = record_started(monkeypatch)
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"0\.2s"):
        LocalHost().run(["sh", "-c", "exec sleep 5"], timeout=0.2)
    assert time.monotonic() - started < 2
    [pid] = started_pids
    with pytest.raises(ProcessLookupError):  # reaped and gone, not left sleeping
        os.kill(pid, 0)


@pytest.mark.parametrize(("stream", "redirect"), [("stdout", ""), ("stderr", " >&2")])
def test_a_command_printing_past_the_bound_is_killed_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stream: str, redirect: str
) -> None:
    """Each output is read up to MAX_READ_BYTES, not whole: a ``yes`` for nvidia-smi took
    accelkit ls to 4.8 GB in 3 s, and past its budget four times over. The command is killed
    there, with an error naming it and the bound, and its layer fails."""
    pid_file = tmp_path / "pid"
    tool = tmp_path / "flood-smi"  # 8 MB, then it goes on running
    tool.write_text(
        f"#!/bin/sh\necho $$ > {pid_file}\nhead -c 8000000 /dev/zero{redirect}\nsleep 5"
    )
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    started = time.monotonic()
    bound = f"flood-smi wrote more than 1048576 bytes to its {stream}"
    with pytest.raises(OSError, match=bound):
        LocalHost().run(["flood-smi"], timeout=4)
    assert time.monotonic() - started < 3
    with pytest.raises(ProcessLookupError):  # killed and reaped, not left printing
        os.kill(int(pid_file.read_text()), 0)
    with collecting("test") as notes:
        assert run_command(LocalHost(), ["flood-smi"], timeout=4) is None
    assert [n.message for n in notes] == [
        f"`flood-smi` failed: {bound}, more than any machine's devices print; killed it"
    ]


def test_a_probe_printing_past_the_bound_is_killed_there() -> None:
    """A library that prints without end fails its probe at the bound, not at its budget (nor
    at the end of the 30 s it sleeps once it has printed). The budget leaves room for a Python
    that starts slowly on a loaded machine (2.8 s seen): 4 s, with the bound at 3, did not."""
    started = time.monotonic()
    with pytest.raises(ProbeError, match="flood wrote more than 1048576 bytes to its stdout"):
        LocalHost().probe(probe_targets.flood, timeout=60)
    assert time.monotonic() - started < 20


def test_a_probe_request_larger_than_a_pipe_reaches_it_whole() -> None:
    assert LocalHost().probe(probe_targets.measure, "x" * 300_000, timeout=10) == 300_000


def test_probe_runs_a_module_function_in_a_spawned_process() -> None:
    result = LocalHost().probe(probe_targets.answer, 2, timeout=10)
    assert result == {"devices": ["0", "1"], "dumped": "[1]"}


PLANTED = "import pathlib\npathlib.Path(__file__).with_name('ran').write_text('{name}')\n"
"""A module another user left in a shared directory, named as a standard one: it says it ran."""


def test_a_probe_imports_nothing_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``python -c`` puts the working directory first on ``sys.path``: a ``json.py`` there ran
    (as whoever ran accelkit in ``/tmp``) when the probe process imported json."""
    for name in ("json", "importlib"):
        (tmp_path / f"{name}.py").write_text(PLANTED.format(name=name))
    monkeypatch.chdir(tmp_path)
    result = LocalHost().probe(probe_targets.answer, 1, timeout=10)
    assert result == {"devices": ["0"], "dumped": "[1]"}
    assert not (tmp_path / "ran").exists()


def test_probe_failures_are_typed() -> None:
    host = LocalHost()
    with pytest.raises(ProbeError, match="RuntimeError: driver said no"):
        host.probe(probe_targets.fail, timeout=10)
    with pytest.raises(ModuleNotFoundError, match="accelkit_no_such_vendor_library"):
        host.probe(probe_targets.need_missing_library, timeout=10)
    with pytest.raises(ProbeError, match="code 3"):
        host.probe(probe_targets.die, timeout=10)


def test_has_library_finds_top_level_packages_without_importing_them() -> None:
    host = LocalHost()
    assert host.has_library("json") and host.has_library("probe_targets")
    assert not host.has_library("accelkit_no_such_vendor_library")
    assert not host.has_library("accelkit_no_such_vendor_library.sub")
    assert "accelkit_no_such_vendor_library" not in sys.modules


def test_no_probe_process_starts_for_a_library_that_is_not_installed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started: list[str] = []

    def probe(self: LocalHost, function: object, *args: object, timeout: object = None) -> str:
        started.append(getattr(function, "__name__", "?"))
        return "probed"

    monkeypatch.setattr(LocalHost, "probe", probe)
    with collecting("test") as notes:
        missing = call_probe(
            LocalHost(), probe_targets.answer, 1, library="accelkit_no_such_vendor_library"
        )
        present = call_probe(LocalHost(), probe_targets.answer, 1, library="json")
    assert (missing, present, started) == (None, "probed", ["answer"])
    assert [n.message for n in notes] == [
        "Python library accelkit_no_such_vendor_library is not installed"
    ]


def test_a_hanging_probe_times_out_quickly() -> None:
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="did not finish"):
        LocalHost().probe(probe_targets.hang, timeout=0.5)
    assert time.monotonic() - started < 3


def test_files_and_env_are_the_machine_s(tmp_path: Path) -> None:
    (tmp_path / "target").write_text("x\n")
    (tmp_path / "link").symlink_to(tmp_path / "target")
    host = LocalHost()
    assert host.read_text(str(tmp_path / "link")) == "x\n"
    assert host.readlink(str(tmp_path / "link")) == str(tmp_path / "target")
    assert host.realpath(str(tmp_path / "link")) == os.path.realpath(tmp_path / "target")
    assert host.env is os.environ


def test_a_local_host_may_be_rooted_elsewhere(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/release").write_text("fake\n")
    (tmp_path / "etc/link").symlink_to("/etc/release")
    host = LocalHost(tmp_path)
    assert host.read_text("/etc/link") == "fake\n"
    assert host.readlink("/etc/link") == "/etc/release"
    assert host.realpath("/etc/link") == "/etc/release"


def test_a_timeout_does_not_wait_for_descendants_that_left_the_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    script = f"setsid sleep 5 & echo $! > {pid_file}; exec sleep 5"
    started = time.monotonic()
    try:
        with pytest.raises(TimeoutError):
            LocalHost().run(["sh", "-c", script], timeout=0.2)
        assert time.monotonic() - started < 3
    finally:
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)


def test_fifos_and_device_nodes_read_as_nothing_instead_of_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    assert LocalHost().read_text(str(tmp_path / "fifo")) is None
    assert LocalHost(tmp_path).read_text("/fifo") is None
    assert LocalHost().read_text("/dev/zero") is None
