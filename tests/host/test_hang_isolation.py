"""Hang isolation: whatever blocks is cut at its budget and reported, and the other families answer.

A vendor command that never returns (a real process, killed), an in-process library whose
initialisation blocks (as a hung ``nvmlInit`` does), a third-party ``detect()`` that blocks, and a
probe process that dies: each is an error diagnostic and a problem in the plugin report, and node
detection returns by its one deadline however many families hang. The elapsed-time bounds below
only catch a detection that hangs; they are far above what any budget allows.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import signal
import subprocess
import threading
import time
import types
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Optional

import probe_targets
import pytest
from accelkit import ConfigurationError, Registry, detect_node
from accelkit._settings import Budgets, seconds
from accelkit.detect import call_probe, detect_layers, library_session, run_command
from accelkit.device import Device
from accelkit.host import FakeHost, Host, LocalHost, ProbeEnv, _processes
from accelkit.host import _deadlines as deadlines
from accelkit.host._base import ProbeFunction
from accelkit.manager import AcceleratorManager
from core_fakes import Provides
from started_pids import record_started

HANG_GUARD = 20.0
"""Seconds after which a detection is taken as hung (every budget here is under 6 s)."""

ROOM = "5"
"""A detection's deadline where some families must answer before it: room for a thread or a
process that a loaded machine starts late (a probe's Python took 2.8 s to start on one core
shared with four busy loops). A family that hangs costs the test this long."""


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at the end of the test, so every blocked call returns and its thread ends."""
    event = threading.Event()
    yield event
    event.set()


class MachineHost(FakeHost):
    """Fake files and libraries, but real commands and probe processes."""

    def run(
        self,
        argv: Sequence[str],
        timeout: Optional[float] = None,
        env: Optional[ProbeEnv] = None,
    ) -> Any:
        return LocalHost().run(argv, timeout=timeout, env=env)

    def has_library(self, name: str) -> bool:
        return True

    def probe(
        self,
        function: ProbeFunction,
        *args: Any,
        timeout: Optional[float] = None,
        env: Optional[ProbeEnv] = None,
    ) -> Any:
        return LocalHost().probe(function, *args, timeout=timeout, env=env)


class Healthy(AcceleratorManager):
    name = "healthy"
    resource_name = "GOOD"

    def detect(self, host: Host) -> list[Device]:
        return [Device("0")]


class HangingCommand(AcceleratorManager):
    name = "command"
    resource_name = "CMD"

    def detect(self, host: Host) -> list[Device]:
        return [Device("0")] if run_command(host, ["sleep", "60"]) is not None else []


class HangingLibrary(AcceleratorManager):
    """A library layer whose init blocks, then a command layer that answers."""

    name = "library"
    resource_name = "LIB"

    def detect(self, host: Host) -> list[Device]:
        return detect_layers(host, ("library", self._library), ("command", self._command))

    def _library(self, host: Host) -> Optional[list[Device]]:
        with library_session(host, "hungsmi", "init", "shutdown") as smi:
            return None if smi is None else [Device("lib")]

    def _command(self, host: Host) -> Optional[list[Device]]:
        return [Device("0"), Device("1")]


class DyingProbe(AcceleratorManager):
    name = "probe"
    resource_name = "PRB"

    def detect(self, host: Host) -> list[Device]:
        return [Device("0")] if call_probe(host, probe_targets.die, library="json") else []


class Blocking(AcceleratorManager):
    """A third-party ``detect()`` that blocks until released."""

    resource_name = "BLK"

    def __init__(self, name: str, release: threading.Event) -> None:
        self.name = name
        self.release = release
        self.started: list[float] = []  # shared: each detection works on a copy of the manager

    @property
    def calls(self) -> int:
        """How many detections have started, on any copy of this manager."""
        return len(self.started)

    def detect(self, host: Host) -> list[Device]:
        self.started.append(time.monotonic())
        self.release.wait()
        return [Device("0")]


def hung_library(release: threading.Event) -> types.SimpleNamespace:
    return types.SimpleNamespace(init=release.wait, shutdown=lambda: None)


def budgets(monkeypatch: pytest.MonkeyPatch, **values: str) -> None:
    for name, value in values.items():
        monkeypatch.setenv(f"ACCELKIT_{name.upper()}_TIMEOUT", value)


def errors(node: Any, family: str) -> list[str]:
    return [d.message for d in node.diagnostics if d.family == family and d.level == "error"]


def test_each_kind_of_hang_is_cut_reported_and_the_others_answer(
    monkeypatch: pytest.MonkeyPatch, release: threading.Event
) -> None:
    budgets(monkeypatch, command="0.3", library="0.3", detect=ROOM)
    managers = [
        Healthy(),
        HangingCommand(),
        HangingLibrary(),
        DyingProbe(),
        Blocking("thirdparty", release),
    ]
    plugins = Registry([Provides(managers)], autoload=False)
    host = MachineHost(modules={"hungsmi": hung_library(release)})
    started = time.monotonic()
    node = detect_node(host, registry=plugins)
    assert time.monotonic() - started < HANG_GUARD
    assert node.resources == {"GOOD": 1.0, "LIB": 2.0}
    assert [m for m in errors(node, "command") if "timed out" in m and "0.3s" in m]
    assert errors(node, "library") == [
        "library layer timed out: hungsmi.init() did not return within 0.3s "
        "(ACCELKIT_LIBRARY_TIMEOUT); hungsmi is not used again until it returns"
    ]
    assert [m for m in errors(node, "probe") if "exited with code 3" in m]
    assert errors(node, "thirdparty") == [
        f"detect() did not finish within {ROOM}s (ACCELKIT_DETECT_TIMEOUT); no devices"
    ]
    assert errors(node, "healthy") == []
    problems = {info.name: info.problems for info in plugins.report()}
    assert problems["test-managers"] == tuple(
        m for f in ("command", "library", "probe", "thirdparty") for m in errors(node, f)
    )


def test_one_deadline_however_many_families_hang(
    monkeypatch: pytest.MonkeyPatch, release: threading.Event
) -> None:
    budgets(monkeypatch, detect=ROOM)
    hung = [Blocking(f"hung{n}", release) for n in range(6)]
    plugins = Registry([Provides([*hung, Healthy()])], autoload=False)
    started = time.monotonic()
    node = detect_node(FakeHost(), registry=plugins)
    assert time.monotonic() - started < HANG_GUARD
    assert node.resources == {"GOOD": 1.0}
    cut = f"detect() did not finish within {ROOM}s (ACCELKIT_DETECT_TIMEOUT); no devices"
    assert all(errors(node, m.name) == [cut] for m in hung)


def test_a_family_still_hung_is_not_detected_again_until_it_returns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    budgets(monkeypatch, detect=ROOM)
    release = threading.Event()
    stuck = Blocking("stuck", release)
    plugins = Registry([Provides([stuck, Healthy()])], autoload=False)
    detect_node(FakeHost(), registry=plugins)
    again = detect_node(FakeHost(), registry=plugins)
    assert stuck.calls == 1
    (skipped,) = errors(again, "stuck")
    assert skipped.startswith("detection skipped: stuck detect() has not returned from an earlier")
    release.set()
    for _ in range(100):  # the abandoned thread returns once released, then detection resumes
        node = detect_node(FakeHost(), registry=plugins)
        if not errors(node, "stuck"):
            break
        time.sleep(0.05)
    assert node.resources == {"BLK": 1.0, "GOOD": 1.0}
    assert stuck.calls == 2


def test_a_library_still_hung_is_not_initialised_again(
    monkeypatch: pytest.MonkeyPatch, release: threading.Event
) -> None:
    budgets(monkeypatch, library="0.2")
    calls: list[str] = []

    def init() -> None:
        calls.append("init")
        release.wait()

    host = FakeHost(modules={"hungsmi": types.SimpleNamespace(init=init, shutdown=print)})
    plugins = Registry([Provides([HangingLibrary()])], autoload=False)
    first = detect_node(host, registry=plugins)
    second = detect_node(host, registry=plugins)
    assert calls == ["init"]
    assert errors(first, "library") == [
        "library layer timed out: hungsmi.init() did not return within 0.2s "
        "(ACCELKIT_LIBRARY_TIMEOUT); hungsmi is not used again until it returns"
    ]
    (again,) = errors(second, "library")
    assert "hungsmi.init() has not returned from an earlier call" in again
    assert second.resources == {"LIB": 2.0}


def test_budgets_are_read_from_the_environment_and_bad_values_name_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert Budgets.from_env({}) == Budgets(command=10, probe=20, library=10, detection=30)
    given = {"ACCELKIT_COMMAND_TIMEOUT": " 2.5 ", "ACCELKIT_DETECT_TIMEOUT": "60"}
    assert Budgets.from_env(given) == Budgets(command=2.5, detection=60)
    for bad in ("0", "-1", "nan", "inf", "soon", "1e999"):
        with pytest.raises(ConfigurationError, match=rf"ACCELKIT_PROBE_TIMEOUT='{bad}'"):
            seconds({"ACCELKIT_PROBE_TIMEOUT": bad}, "ACCELKIT_PROBE_TIMEOUT", 20)
    monkeypatch.setenv("ACCELKIT_DETECT_TIMEOUT", "never")
    with pytest.raises(ConfigurationError, match="ACCELKIT_DETECT_TIMEOUT='never'"):
        detect_node(FakeHost(), registry=Registry([Provides([Healthy()])], autoload=False))


def test_a_command_is_killed_at_the_detection_deadline_before_its_own_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    budgets(monkeypatch, command="60", detect="0.5")
    plugins = Registry([Provides([HangingCommand()])], autoload=False)
    started = time.monotonic()
    node = detect_node(MachineHost(), registry=plugins)
    assert time.monotonic() - started < HANG_GUARD
    assert node.devices == []
    assert errors(node, "command"), node.diagnostics


class Lingering(AcceleratorManager):
    """A command (``acme-smi``, first on PATH) or a probe process that runs until killed, its
    pid written to ``pid_file``."""

    name = "lingering"
    resource_name = "LNG"

    def __init__(self, kind: str, pid_file: Path) -> None:
        self.kind = kind
        self.pid_file = pid_file

    def detect(self, host: Host) -> list[Device]:
        if self.kind == "command":
            run_command(host, ["acme-smi"])
        else:
            call_probe(host, probe_targets.linger, str(self.pid_file), library="json")
        return []


def running(pid: int, within: float) -> bool:
    """Whether process ``pid`` still runs after ``within`` seconds (a signal takes effect when
    the process is next scheduled; one killed and not yet reaped is a zombie: it does not)."""
    ends = time.monotonic() + within
    while time.monotonic() < ends:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except FileNotFoundError:
            return False
        if stat.rpartition(")")[2].split()[0] == "Z":
            return False
        time.sleep(0.02)
    return True


@pytest.mark.parametrize("kind", ["command", "probe"])
def test_what_a_detection_started_is_killed_when_its_deadline_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, release: threading.Event, kind: str
) -> None:
    """A process still running at the deadline is killed before detection returns, not by its
    worker thread, which may come too late: ``accelkit ls`` exits as soon as detection returns,
    and a ``neuron-ls`` sleeping 60 s outlived it. Here the workers' own kills wait.

    The process is known by the pid ``Popen`` gave, not by the one it writes: a probe's Python
    may not have got that far by the deadline on a loaded machine (it is killed all the same)."""
    budgets(monkeypatch, command="60", probe="60", detect="1")
    pid_file = tmp_path / "pid"
    (tmp_path / "acme-smi").write_text(f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 60\n")
    (tmp_path / "acme-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    kill = _processes._kill_group

    def late(process: subprocess.Popen[bytes]) -> None:
        release.wait()
        kill(process)

    monkeypatch.setattr(_processes, "_kill_group", late)
    started = record_started(monkeypatch)
    plugins = Registry([Provides([Lingering(kind, pid_file)])], autoload=False)
    node = detect_node(MachineHost(), registry=plugins)
    [pid] = started
    written = pid_file.read_text() if pid_file.exists() else ""
    assert written in ("", f"{pid}", f"{pid}\n")  # the same process, if it got to say so
    try:
        assert not running(pid, within=2.0)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert errors(node, "lingering") == [
        "detect() did not finish within 1s (ACCELKIT_DETECT_TIMEOUT); no devices"
    ]


class Exiting(AcceleratorManager):
    name = "exiting"
    resource_name = "EXIT"

    def detect(self, host: Host) -> list[Device]:
        raise SystemExit(3)


def test_a_detect_that_exits_ends_only_its_own_family() -> None:
    plugins = Registry([Provides([Exiting(), Healthy()])], autoload=False)
    node = detect_node(FakeHost(), registry=plugins)
    assert node.resources == {"GOOD": 1.0}
    assert errors(node, "exiting") == ["detection failed: SystemExit: 3"]


def test_nothing_starts_once_the_deadline_has_passed() -> None:
    with deadlines.clock(Budgets(detection=0.01)):
        time.sleep(0.05)
        with pytest.raises(TimeoutError, match="deadline passed"):
            LocalHost().run(["sleep", "60"])
        with pytest.raises(TimeoutError, match="deadline passed"):
            LocalHost().probe(probe_targets.answer, 1)


def test_a_library_layer_is_cut_only_for_its_time_in_the_library(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A library layer may spend longer than the library budget outside a library session (a
    # probe process has its own, longer, budget): only its session is bounded.
    budgets(monkeypatch, library="0.1")

    def slow_probe_then_answer(host: Host) -> list[Device]:
        time.sleep(0.3)
        return [Device("0")]

    with deadlines.clock(Budgets.from_env({"ACCELKIT_LIBRARY_TIMEOUT": "0.1"})):
        devices = detect_layers(FakeHost(), ("library", slow_probe_then_answer))
    assert [(d.id, d.source) for d in devices] == [("0", "library")]


def test_nothing_starts_once_the_detection_is_over() -> None:
    """A thread a detection left behind (its context copied) starts no process after it ends,
    even before its deadline: nothing would kill it."""
    with deadlines.clock(Budgets(detection=60)):
        left_behind = contextvars.copy_context()
    with pytest.raises(TimeoutError, match="its detection is over"):
        left_behind.run(LocalHost().run, ["sleep", "60"])
    with pytest.raises(TimeoutError, match="its detection is over"):
        left_behind.run(LocalHost().probe, probe_targets.answer, 1)
