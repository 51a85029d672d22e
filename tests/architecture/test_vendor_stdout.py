"""Nothing a vendor library prints reaches accelkit's stdout: ``accelkit ls --json`` stays JSON.

``import amdsmi`` without ROCm prints a hint (from Python) and raises ``KeyError``; C libraries
print straight to file descriptor 1. Both are caught while importing and kept as a note.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from types import ModuleType

import accelkit
import pytest
from accelkit._stdout import end_captures, stdout_captured
from accelkit.detect import import_library
from accelkit.diagnostics import collecting


class PrintingHost(accelkit.FakeHost):
    """A host whose libraries print while importing, from Python and from "C" (fd 1)."""

    def import_module(self, name: str) -> ModuleType:
        print(f"{name}: python-level chatter")
        os.write(1, f"{name}: descriptor-level chatter\n".encode())
        if name == "amdsmi":
            raise KeyError("libamd_smi.so")
        return ModuleType(name)


def test_printing_at_import_becomes_a_note_and_never_stdout(capfd: object) -> None:
    with collecting("amd") as notes:
        assert import_library(PrintingHost(), "amdsmi") is None
        assert import_library(PrintingHost(), "vendorlib") is not None
    out, _err = capfd.readouterr()  # type: ignore[attr-defined]
    assert out == ""
    messages = [(n.level, n.message) for n in notes]
    assert ("info", "amdsmi is installed but its C library is not: KeyError: 'libamd_smi.so'") in (
        messages
    )
    printed = [m for level, m in messages if m.startswith("importing amdsmi printed:")]
    assert printed == [
        "importing amdsmi printed: amdsmi: python-level chatter amdsmi: descriptor-level chatter"
    ]
    assert all(level == "info" for level, _ in messages)


def test_ls_json_is_json_with_the_real_vendor_wrappers_installed(amdsmi_dir: Path) -> None:
    """nvidia-ml-py (the test extra) and amdsmi (fetched, on the path) are importable; wherever
    their C libraries are missing (CI, this machine) their import and init must stay off stdout
    and out of the warnings."""
    inherited = os.environ.get("PYTHONPATH", "")  # where accelkit itself may come from
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(amdsmi_dir.parent), inherited])}
    result = subprocess.run(
        [sys.executable, "-m", "accelkit.cli", "ls", "--json"],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    node = json.loads(result.stdout)  # no vendor chatter before or after the JSON
    messages = [d["message"] for d in node["diagnostics"] if d["family"] == "amd"]
    assert any(m.startswith("amdsmi") or "amdsmi" in m for m in messages), messages
    amd = [d for d in node["diagnostics"] if d["family"] in ("amd", "nvidia")]
    if not node["devices"]:
        assert all(d["level"] == "info" for d in amd), amd


def test_captures_on_several_threads_take_turns_and_leave_stdout_as_it_was(capfd: object) -> None:
    """Families detect on several threads; descriptor 1 is one per process."""
    original, descriptor = sys.stdout, os.fstat(1)
    texts: dict[str, str] = {}

    def chatter(name: str) -> None:
        with stdout_captured() as printed:
            for _ in range(50):
                print(name)
                os.write(1, f"{name}-c\n".encode())
        texts[name] = printed[0]

    threads = [threading.Thread(target=chatter, args=(n,)) for n in ("a", "b", "c")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    out, _err = capfd.readouterr()  # type: ignore[attr-defined]
    assert out == ""
    for name, text in texts.items():
        assert sorted(set(text.split())) == sorted({name, f"{name}-c"})
        assert text.count(f"{name}-c\n") == 50
    assert sys.stdout is original
    assert os.fstat(1).st_ino == descriptor.st_ino


class HangingImportHost(accelkit.FakeHost):
    """A host whose vendor library prints, then never finishes importing (a hung driver)."""

    def __init__(self, release: threading.Event) -> None:
        super().__init__()
        self.release = release

    def import_module(self, name: str) -> ModuleType:
        print("hung library says hello")
        self.release.wait()
        raise ModuleNotFoundError(name)


class HungLibrary(accelkit.AcceleratorManager):
    name = "hung"
    resource_name = "HUNG"

    def detect(self, host: accelkit.Host) -> list[accelkit.Device]:
        import_library(host, "hungsmi")  # no budget of its own: only the deadline ends it
        return []


class Provides:
    @accelkit.hookimpl
    def accelkit_register_managers(self) -> list[accelkit.AcceleratorManager]:
        return [HungLibrary()]


def test_a_hung_import_does_not_keep_accelkits_own_stdout(
    capfd: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACCELKIT_DETECT_TIMEOUT", "0.5")
    release = threading.Event()
    try:
        plugins = accelkit.Registry([Provides()], autoload=False)
        node = accelkit.detect_node(HangingImportHost(release), registry=plugins)
        print("accelkit's own output")
        sys.stdout.flush()
        os.write(1, b"and its descriptor-level output\n")
        out, _err = capfd.readouterr()  # type: ignore[attr-defined]
        assert out == "accelkit's own output\nand its descriptor-level output\n"
        assert [d.level for d in node.diagnostics if d.family == "hung"] == ["error"]
    finally:
        release.set()


def test_after_a_hung_capture_is_ended_others_proceed_and_its_end_changes_nothing(
    capfd: object,
) -> None:
    original = sys.stdout
    entered, release = threading.Event(), threading.Event()
    hung_text: list[str] = []

    def hung() -> None:
        with stdout_captured() as printed:
            print("before the hang")
            entered.set()
            release.wait()
            print("after the hang")
        hung_text.extend(printed)

    thread = threading.Thread(target=hung)
    thread.start()
    assert entered.wait(5)
    end_captures()  # detection gave up on the hung import
    assert sys.stdout is original
    with stdout_captured() as printed:  # does not wait for the hung one
        print("next library")
    assert printed == ["next library\n"]
    release.set()
    thread.join(5)
    assert hung_text == ["before the hang\n"]  # what it printed before it was given up on
    assert sys.stdout is original
    print("ours")
    out, _err = capfd.readouterr()  # type: ignore[attr-defined]
    assert out == "after the hang\nours\n"  # a library printing after it was given up on
