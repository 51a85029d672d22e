"""The example third-party package, installed, discovered through its entry point; and the
deliberately broken example, which must load so the conformance kit can reject it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from accelkit import FakeHost, InvalidRequest, registry
from accelkit.registry import contract_errors
from fake_dists import FakeSite

if sys.version_info >= (3, 10):
    from importlib import metadata
else:
    import importlib_metadata as metadata

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "accelkit-example"
INSTALL = f"{sys.executable} -m pip install -e {EXAMPLE}"


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Discovery over this Python's real entry points, where the example must be installed."""
    try:
        metadata.distribution("accelkit-example")
    except metadata.PackageNotFoundError:
        pytest.fail(f"the example plugin is not installed; run: {INSTALL}")
    registry.set_default(registry.Registry())


def test_the_example_is_discovered_through_its_entry_point(installed: None) -> None:
    info = next(i for i in registry.plugin_report() if i.name == "acme")
    assert (info.origin, info.module, info.dist, info.status) == (
        "entry-point",
        "accelkit_example",
        "accelkit-example",
        "ok",
    )
    assert info.families == ("acme",)
    manager = registry.get_manager("acme")
    assert type(manager).__name__ == "AcmeManager"
    assert contract_errors(manager) == []


def test_the_example_declares_a_fake_host_builder_for_the_kit(installed: None) -> None:
    points = metadata.entry_points(group="accelkit.testing")
    assert [ep.value for ep in points if ep.name == "acme"] == ["accelkit_example.fakes:make_host"]


def test_the_example_detects_cards_through_the_host(installed: None, tmp_path: Path) -> None:
    from accelkit_example.fakes import make_host

    manager = registry.get_manager("acme")
    devices = manager.detect(make_host(11, tmp_path))
    assert [d.id for d in devices] == [str(n) for n in range(11)]
    assert {(d.model, d.type_label, d.source) for d in devices} == {
        ("ACME Rocket X1", "ACME-Rocket-X1", "devfs")
    }
    assert manager.detect(FakeHost()) == []
    assert manager.visibility_env(["0", "2"]) == {"ACME_VISIBLE_DEVICES": "0,2"}
    with pytest.raises(InvalidRequest, match="granted whole"):
        manager.validate_quantity(0.5)


def test_the_example_plugin_module_stays_under_40_code_lines() -> None:
    spec = importlib.util.spec_from_file_location(
        "project_rules", ROOT / "tests" / "test_project.py"
    )
    assert spec is not None and spec.loader is not None
    rules = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rules)
    source = (EXAMPLE / "src" / "accelkit_example" / "__init__.py").read_text()
    assert rules.code_lines(source) < 40


def test_the_broken_example_loads_so_the_kit_can_judge_it(
    site: FakeSite, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    request.addfinalizer(lambda: sys.modules.pop("accelkit_broken", None))
    monkeypatch.syspath_prepend(str(ROOT / "examples" / "accelkit-broken" / "src"))
    site.add("accelkit-broken", {"broken": "accelkit_broken"})
    info = next(i for i in registry.plugin_report() if i.name == "broken")
    assert (info.status, info.families) == ("ok", ("broken",))
    assert contract_errors(registry.get_manager("broken")) == []
