"""FakeHost: exactly what it is given, never the real machine (DESIGN.md, "The plugin contract")."""

from __future__ import annotations

import fnmatch
import os
import tempfile
import types
from pathlib import Path
from typing import Any, Optional

import pytest
from accelkit.errors import ProbeError
from accelkit.host import CommandResult, FakeHost, HostView
from accelkit.host import _fake as fake_host_module
from accelkit.host._base import natural_key, resolve_under
from hypothesis import given
from hypothesis import strategies as st


def test_an_empty_fake_host_exposes_nothing_of_the_real_machine() -> None:
    host = FakeHost()
    assert host.read_text("/etc/hostname") is None
    assert host.read_text("/proc/cpuinfo") is None
    assert not host.exists("/")
    assert not host.exists("/dev/null")
    assert host.listdir("/") == []
    assert host.glob("/dev/*") == []
    assert host.readlink("/proc/self") is None
    assert host.realpath("/proc/self") is None
    assert dict(host.env) == {}
    with pytest.raises(FileNotFoundError):
        host.run(["true"])
    with pytest.raises(ModuleNotFoundError):
        host.import_module("json")  # even the stdlib is not importable unless given


def test_env_is_only_what_was_given_and_a_copy() -> None:
    given = {"CUDA_VISIBLE_DEVICES": "0"}
    host = FakeHost(env=given)
    given["CUDA_VISIBLE_DEVICES"] = "1"
    assert dict(host.env) == {"CUDA_VISIBLE_DEVICES": "0"}
    assert "PATH" not in host.env


def test_command_by_program_name_with_rc_and_stdout() -> None:
    host = FakeHost(commands={"nvidia-smi": (0, "0, GPU-1\n")})
    assert host.run(["nvidia-smi", "--query-gpu=index"]) == CommandResult(0, "0, GPU-1\n", "")
    assert host.runs == [("nvidia-smi", "--query-gpu=index")]


def test_command_with_rc_stdout_and_stderr() -> None:
    host = FakeHost(commands={"hl-smi": (9, "", "driver not loaded")})
    assert host.run(["hl-smi"]) == CommandResult(9, "", "driver not loaded")


def test_longest_argv_prefix_wins_over_shorter_and_program_name() -> None:
    host = FakeHost(
        commands={
            "neuron-ls": (0, "name"),
            ("neuron-ls", "--json-output"): (0, "prefix"),
            ("neuron-ls", "--json-output", "--verbose"): (0, "longest"),
        }
    )
    assert host.run(["neuron-ls", "--json-output", "--verbose"]).stdout == "longest"
    assert host.run(["neuron-ls", "--json-output"]).stdout == "prefix"
    assert host.run(["neuron-ls", "--output-format", "json"]).stdout == "name"


def test_a_prefix_key_does_not_answer_other_arguments() -> None:
    host = FakeHost(commands={("npu-smi", "info", "-m"): (0, "map")})
    with pytest.raises(FileNotFoundError):
        host.run(["npu-smi", "info", "-l"])


def test_exception_instance_and_class_are_raised() -> None:
    host = FakeHost(commands={"slow": TimeoutError("hung"), "gone": PermissionError})
    with pytest.raises(TimeoutError, match="hung"):
        host.run(["slow"])
    with pytest.raises(PermissionError):
        host.run(["gone", "-x"])


def test_callable_gets_argv_and_may_answer_any_spec() -> None:
    def answer(argv: object) -> object:
        assert isinstance(argv, tuple)
        return TimeoutError("late") if "--slow" in argv else (0, " ".join(argv))

    host = FakeHost(commands={"tool": answer})
    assert host.run(["tool", "a"]).stdout == "tool a"
    with pytest.raises(TimeoutError):
        host.run(["tool", "--slow"])


def test_bad_command_specs_are_errors() -> None:
    with pytest.raises(ValueError):
        FakeHost(commands={(): (0, "")})
    host = FakeHost(commands={"odd": (0,)})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="cannot answer"):
        host.run(["odd"])
    with pytest.raises(ValueError):
        host.run([])


def test_modules_are_importable_by_name_and_exception_values_raise() -> None:
    fake = object()
    host = FakeHost(modules={"pynvml": fake, "acl": ImportError("no CANN"), "dpctl": OSError})
    assert host.import_module("pynvml") is fake
    with pytest.raises(ImportError, match="no CANN"):
        host.import_module("acl")
    with pytest.raises(OSError):
        host.import_module("dpctl")
    with pytest.raises(ModuleNotFoundError):
        host.import_module("amdsmi")
    assert [host.has_library(n) for n in ("pynvml", "acl", "dpctl", "amdsmi")] == [
        True,
        True,
        True,
        False,
    ]


def _double(import_module: object, value: int) -> int:
    return value * 2


def _boom(import_module: object) -> None:
    raise RuntimeError("bad driver")


def _needs_acl(import_module: object) -> object:
    return import_module("acl")  # type: ignore[operator]


def test_probe_runs_in_process_with_the_fake_modules() -> None:
    host = FakeHost()
    assert host.probe(_double, 21) == 42
    with pytest.raises(ProbeError, match="RuntimeError: bad driver"):
        host.probe(_boom)
    with pytest.raises(ModuleNotFoundError):
        host.probe(_needs_acl)


def test_files_are_read_under_the_root(tmp_path: Path) -> None:
    (tmp_path / "sys/class/drm/card0/device").mkdir(parents=True)
    (tmp_path / "sys/class/drm/card0/device/vendor").write_text("0x10de\n")
    host = FakeHost(root=tmp_path)
    assert host.read_text("/sys/class/drm/card0/device/vendor") == "0x10de\n"
    assert host.exists("/sys/class/drm/card0")
    assert host.is_dir("/sys/class/drm/card0")
    assert not host.is_dir("/sys/class/drm/card0/device/vendor")
    assert host.read_text("/sys/class/drm/card0") is None  # a directory reads as nothing
    assert host.read_text("/sys/missing") is None
    with pytest.raises(ValueError, match="absolute"):
        host.read_text("sys/class")


def test_relative_symlinks_resolve_inside_the_root(tmp_path: Path) -> None:
    device = tmp_path / "sys/devices/pci0000:00/0000:3b:00.0"
    device.mkdir(parents=True)
    (device / "vendor").write_text("0x1002\n")
    (tmp_path / "sys/bus/pci/drivers/amdgpu").mkdir(parents=True)
    (device / "driver").symlink_to("../../../bus/pci/drivers/amdgpu")
    (tmp_path / "sys/class/drm/card1").mkdir(parents=True)
    (tmp_path / "sys/class/drm/card1/device").symlink_to("../../../devices/pci0000:00/0000:3b:00.0")
    host = FakeHost(root=tmp_path)
    assert host.read_text("/sys/class/drm/card1/device/vendor") == "0x1002\n"
    assert host.realpath("/sys/class/drm/card1/device") == "/sys/devices/pci0000:00/0000:3b:00.0"
    assert host.readlink("/sys/class/drm/card1/device/driver") == "../../../bus/pci/drivers/amdgpu"
    assert host.is_dir("/sys/class/drm/card1/device/driver")


def test_absolute_symlink_targets_resolve_inside_the_root_never_outside(tmp_path: Path) -> None:
    (tmp_path / "opt").mkdir()
    (tmp_path / "opt/version").write_text("fake\n")
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/version").symlink_to("/opt/version")
    (tmp_path / "etc/passwd").symlink_to("/etc/passwd")  # a loop inside the root, not the real file
    (tmp_path / "etc/escape").symlink_to("../../../../../../../../etc/hostname")
    host = FakeHost(root=tmp_path)
    assert host.read_text("/etc/version") == "fake\n"
    assert host.realpath("/etc/version") == "/opt/version"
    assert host.read_text("/etc/passwd") is None
    assert host.read_text("/etc/escape") is None  # clamped at the root: /etc/hostname is not there
    assert host.realpath("/etc/escape") == "/etc/hostname"


def test_binary_and_unreadable_files_read_as_none(tmp_path: Path) -> None:
    (tmp_path / "bin").write_bytes(b"\x7fELF\0\0\1")
    (tmp_path / "latin").write_bytes(b"caf\xe9")
    secret = tmp_path / "secret"
    secret.write_text("x")
    secret.chmod(0)
    host = FakeHost(root=tmp_path)
    assert host.read_text("/bin") is None
    assert host.read_text("/latin") is None
    if os.geteuid() != 0:  # root reads anything
        assert host.read_text("/secret") is None
    assert host.exists("/bin")


def test_listdir_and_glob_use_natural_order(tmp_path: Path) -> None:
    drm = tmp_path / "sys/class/drm"
    drm.mkdir(parents=True)
    for name in ("card10", "card2", "card1", "renderD128", "card0-DP-1"):
        (drm / name).mkdir()
    host = FakeHost(root=tmp_path)
    assert host.listdir("/sys/class/drm") == [
        "card0-DP-1",
        "card1",
        "card2",
        "card10",
        "renderD128",
    ]
    assert host.glob("/sys/class/drm/card[0-9]*") == [
        "/sys/class/drm/card0-DP-1",
        "/sys/class/drm/card1",
        "/sys/class/drm/card2",
        "/sys/class/drm/card10",
    ]
    assert host.glob("/sys/class/*/card2") == ["/sys/class/drm/card2"]
    assert host.listdir("/sys/missing") == []
    assert sorted(["card10", "card2"], key=natural_key) == ["card2", "card10"]


NAMES = st.text(alphabet="aAcrd0129.-_[]", min_size=1, max_size=8).filter(
    lambda name: name not in (".", "..")
)


@given(
    st.sets(NAMES, max_size=12),
    st.sampled_from(["card[0-9]*", "*", "?", "A*", "*[]]*", "[!a]*", "*.*", "a?c*", "d[0-2]"]),
)
def test_glob_matches_each_name_as_fnmatchcase_and_sorts_the_matches_naturally(
    names: set[str], pattern: str
) -> None:
    with tempfile.TemporaryDirectory() as root:
        os.mkdir(os.path.join(root, "dev"))
        for name in names:
            open(os.path.join(root, "dev", name), "w").close()
        found = FakeHost(root=root).glob(f"/dev/{pattern}")
    expected = sorted((n for n in names if fnmatch.fnmatchcase(n, pattern)), key=natural_key)
    assert found == [f"/dev/{name}" for name in expected]


def test_glob_lists_dangling_symlinks_as_the_machine_would(tmp_path: Path) -> None:
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev/accel0").symlink_to("/nowhere")
    host = FakeHost(root=tmp_path)
    assert host.glob("/dev/accel*") == ["/dev/accel0"]
    assert host.glob("/dev/accel0") == ["/dev/accel0"]
    assert not host.exists("/dev/accel0")


def test_a_view_narrows_the_environment_and_delegates_the_rest(tmp_path: Path) -> None:
    (tmp_path / "sys").mkdir()
    (tmp_path / "sys" / "f").write_text("x")
    (tmp_path / "sys" / "link").symlink_to("f")
    module = types.ModuleType("vendorlib")
    host = FakeHost(
        root=tmp_path,
        env={"A": "1", "B": "2", "HOME": "/root"},
        commands={"tool": (0, "out")},
        modules={"vendorlib": module},
    )
    view = host.view(["A", "MISSING"])
    assert isinstance(view, HostView) and view.inner is host
    assert dict(view.env) == {"A": "1"}
    assert view.read_text("/sys/f") == "x" and view.exists("/sys/f") and view.is_dir("/sys")
    assert view.listdir("/sys") == ["f", "link"] and view.glob("/sys/*") == ["/sys/f", "/sys/link"]
    assert view.readlink("/sys/link") == "f" and view.realpath("/sys/link") == "/sys/f"
    assert view.run(["tool", "-x"]).stdout == "out"
    assert host.runs == [("tool", "-x")]
    assert view.import_module("vendorlib") is module
    assert view.probe(lambda imp: imp("vendorlib").__name__) == "vendorlib"


def test_each_directory_is_resolved_once_however_often_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cards = tmp_path / "sys" / "devices" / "pci0000:00" / "0000:17:00.0"
    cards.mkdir(parents=True)
    for name in ("vendor", "device", "numa_node"):
        (cards / name).write_text(f"{name}\n")
    (tmp_path / "sys" / "bus").mkdir()
    (tmp_path / "sys" / "bus" / "card0").symlink_to("../devices/pci0000:00/0000:17:00.0")
    walks: list[str] = []

    def counted(root: Any, path: str, visit: Any = None) -> Optional[str]:
        walks.append(path)
        return resolve_under(root, path, visit)

    monkeypatch.setattr(fake_host_module, "resolve_under", counted)
    host = FakeHost(root=tmp_path)
    for _ in range(3):
        texts = [host.read_text(f"/sys/bus/card0/{n}") for n in ("vendor", "device", "numa_node")]
        assert texts == ["vendor\n", "device\n", "numa_node\n"]
    assert walks == ["/sys", "/sys/bus/card0"]  # the top directory, then the one symlink
    assert host.realpath("/sys/bus/card0/vendor") == "/sys/devices/pci0000:00/0000:17:00.0/vendor"
