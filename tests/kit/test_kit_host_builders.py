"""Finding a family's backdoor ``make_host``: declared (built-ins too), replaced, missing, broken,
claimed twice."""

from __future__ import annotations

import types
from typing import Any

import accelkit.testing.fakes as fakes
import pytest
from accelkit.testing.fakes import BrokenHostBuilder, host_builder


class FakeDist:
    def __init__(self, name: str, version: str) -> None:
        self.metadata = {"Name": name}
        self.version = version


class FakeEntryPoint:
    def __init__(self, name: str, value: str, dist: FakeDist, loaded: Any) -> None:
        self.name, self.value, self.dist, self._loaded = name, value, dist, loaded

    def load(self) -> Any:
        if isinstance(self._loaded, BaseException):
            raise self._loaded
        return self._loaded


def declare(monkeypatch: pytest.MonkeyPatch, *points: FakeEntryPoint) -> None:
    def entry_points(group: str) -> list[FakeEntryPoint]:
        assert group == fakes.ENTRY_POINT_GROUP
        return list(points)

    monkeypatch.setattr(fakes, "metadata", types.SimpleNamespace(entry_points=entry_points))


def make_host(count: int, root: Any) -> Any:
    return ("host", count)


def builtin_make_host(count: int, root: Any) -> Any:
    return ("built-in host", count)


def test_a_declared_builder_wins_over_the_builtin(monkeypatch: pytest.MonkeyPatch) -> None:
    builtin = FakeDist("accelkit", "0.1.0")
    declare(
        monkeypatch,
        FakeEntryPoint("nvidia", "v.fakes:make_host", FakeDist("v", "1"), make_host),
        FakeEntryPoint(
            "nvidia", "accelkit_plugins.nvidia.testing:make_host", builtin, builtin_make_host
        ),
    )
    assert host_builder("nvidia") is make_host


def test_a_builtin_family_is_found_through_its_declaration(monkeypatch: pytest.MonkeyPatch) -> None:
    assert host_builder("tpu").__module__ == "accelkit_plugins.tpu.testing"
    declare(monkeypatch)  # the built-ins have no other way in: undeclared, a family has none
    with pytest.raises(LookupError, match="no host builder for family 'tpu'"):
        host_builder("tpu")


def test_an_undeclared_family_says_how_to_declare_one(monkeypatch: pytest.MonkeyPatch) -> None:
    declare(monkeypatch)
    with pytest.raises(LookupError, match=r'zeta = "yourpackage.fakes:make_host"') as info:
        host_builder("zeta")
    assert not isinstance(info.value, BrokenHostBuilder)


def test_a_builder_that_does_not_load_is_broken(monkeypatch: pytest.MonkeyPatch) -> None:
    failing = ImportError("No module named 'zeta_fakes'")
    declare(monkeypatch, FakeEntryPoint("zeta", "zeta_fakes:make", FakeDist("zeta", "2"), failing))
    with pytest.raises(BrokenHostBuilder, match=r"zeta_fakes:make.*does not load.*ImportError"):
        host_builder("zeta")


def test_two_distributions_declaring_one_family_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    declare(
        monkeypatch,
        FakeEntryPoint("zeta", "b.fakes:make_host", FakeDist("zeta-b", "1.0"), make_host),
        FakeEntryPoint("zeta", "a.fakes:make_host", FakeDist("zeta-a", "2.0"), make_host),
    )
    with pytest.raises(BrokenHostBuilder, match=r"2 distributions .*: zeta-a 2\.0, zeta-b 1\.0"):
        host_builder("zeta")


def test_one_distribution_seen_twice_on_the_path_is_not_a_clash(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dist = FakeDist("zeta", "1.0")
    declare(
        monkeypatch,
        FakeEntryPoint("zeta", "zeta.fakes:make_host", dist, make_host),
        FakeEntryPoint("zeta", "zeta.fakes:make_host", FakeDist("zeta", "1.0"), make_host),
    )
    assert host_builder("zeta") is make_host


def test_the_nvidia_and_amd_fake_library_builders_are_public() -> None:
    # imported here: pytester runs elsewhere in the suite may have re-imported the kit's modules
    import accelkit.testing as kit
    import accelkit.testing.fakes.amd as amd
    import accelkit.testing.fakes.nvidia as nvidia

    # by name, not identity: pytester runs restore sys.modules, so a module may be imported twice
    for module, names in (
        (nvidia, ("fake_pynvml", "fake_gpus", "FakeGpu", "FakeMig")),
        (amd, ("fake_amdsmi", "fake_amdgpus", "FakeAmdGpu")),
    ):
        for name in names:
            public = getattr(kit, name)
            assert (public.__module__, public.__qualname__) == (module.__name__, name)
    nvml = fakes.fake_pynvml(fakes.fake_gpus(2, "NVIDIA H100 80GB HBM3"))
    nvml.nvmlInit()
    assert nvml.nvmlDeviceGetCount() == 2
