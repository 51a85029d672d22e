"""The cheap look at sys.path that spares importlib.metadata: "only built-ins" only when certain."""

from __future__ import annotations

import importlib.machinery
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from accelkit.registry._loading import BUILTIN_PLUGINS
from accelkit.registry._sites import only_builtin_entry_points
from fake_dists import FakeSite


@pytest.fixture
def alone(site: FakeSite, monkeypatch: pytest.MonkeyPatch) -> FakeSite:
    """The fake site as the only entry of sys.path, and the standard finders only (a library
    imported earlier in the session, such as distributed's toolz, may add a finder that lists
    distributions too)."""
    monkeypatch.setattr(sys, "path", [str(site.path)])
    path_finder = importlib.machinery.PathFinder
    others = [f for f in sys.meta_path if not hasattr(f, "find_distributions")]
    monkeypatch.setattr(
        sys, "meta_path", [*(f for f in others if f is not path_finder), path_finder]
    )
    return site


def only_builtins() -> bool:
    return only_builtin_entry_points("accelkit", BUILTIN_PLUGINS)


def test_accelkit_s_own_entry_points_are_built_ins(alone: FakeSite) -> None:
    assert only_builtins()
    alone.add("accelkit", {"nvidia": "accelkit_plugins.nvidia", "tpu": "accelkit_plugins.tpu"})
    alone.add("unrelated", {})
    assert only_builtins()


def test_a_third_party_entry_point_or_object_reference_is_seen(alone: FakeSite) -> None:
    alone.add("acme", {"acme": "acme_plugin:plugin"})
    assert not only_builtins()


def test_other_groups_and_comments_do_not_count(alone: FakeSite) -> None:
    info = alone.path / "tool-1.0.dist-info"
    info.mkdir()
    (info / "entry_points.txt").write_text(
        "[console_scripts]\nacme = acme_plugin:main\n\n# [accelkit]\n[accelkit.testing]\nx = y\n"
    )
    assert only_builtins()


def test_an_unreadable_entry_points_file_is_not_taken_for_none(alone: FakeSite) -> None:
    info = alone.path / "broken-1.0.dist-info"
    info.mkdir()
    (info / "entry_points.txt").write_bytes(b"[accelkit]\nx = \xff\xfe\n")
    assert not only_builtins()


def test_a_zip_or_egg_on_the_path_sends_discovery_to_importlib_metadata(
    alone: FakeSite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = tmp_path / "plugins.zip"
    with zipfile.ZipFile(archive, "w") as handle:
        handle.writestr("acme-1.0.dist-info/entry_points.txt", "[accelkit]\nacme = acme\n")
    monkeypatch.setattr(sys, "path", [str(alone.path), str(archive)])
    assert not only_builtins()
    egg = tmp_path / "acme-1.0.egg"
    egg.mkdir()
    monkeypatch.setattr(sys, "path", [str(alone.path), str(egg)])
    assert not only_builtins()
    monkeypatch.setattr(sys, "path", [str(alone.path), str(tmp_path / "missing.zip")])
    assert only_builtins()


def test_another_distribution_finder_sends_discovery_to_importlib_metadata(
    alone: FakeSite, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Finder:
        @staticmethod
        def find_distributions(*args: Any, **kwargs: Any) -> list[Any]:
            return []

    monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, Finder])
    assert not only_builtins()
    monkeypatch.setattr(sys, "meta_path", [m for m in sys.meta_path if m is not Finder])
    assert importlib.machinery.PathFinder in sys.meta_path
    assert only_builtins()
