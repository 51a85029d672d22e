"""Entry points read from sys.path without importlib.metadata: its answer exactly, or none.

Every reading here is compared with ``importlib.metadata``'s own on the same directories (the
backport's on Python 3.9, as discovery uses it there); where ``site_entry_points`` answers None,
discovery asks ``importlib.metadata``, which ``installed_entry_points`` is checked against too.
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Optional

import pytest
from accelkit.registry import _sites
from accelkit.registry._loading import installed_entry_points
from accelkit.registry._sites import SiteDistribution, SiteEntryPoint, site_entry_points
from fake_dists import PLUGIN_VARS, FakeSite, manager_module, metadata
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

Reading = Optional[list[tuple[Any, ...]]]

BACKPORT = sys.version_info < (3, 10)
"""Discovery's ``importlib.metadata`` is then the ``importlib_metadata`` backport."""

read_here = pytest.mark.skipif(
    BACKPORT,
    reason="on Python 3.9 discovery asks the importlib_metadata backport, which this session has "
    "imported: it takes distribution finding over, so this reading is never made in-process here; "
    "the fresh-interpreter test compares it with the backport",
)


def standard_finders() -> list[Any]:
    """``sys.meta_path`` without any finder that lists distributions but ``PathFinder`` (a
    library imported earlier in the session, such as distributed's toolz, may add one)."""
    path_finder = importlib.machinery.PathFinder
    others = [f for f in sys.meta_path if not hasattr(f, "find_distributions")]
    return [*(f for f in others if f is not path_finder), path_finder]


def standard_library() -> list[str]:
    """The standard library's directories: ``importlib.metadata`` imports parts of the email
    package while it reads (Python 3.13), and they hold no distribution."""
    paths = sysconfig.get_paths()
    found = [paths["stdlib"], paths["platstdlib"], os.path.join(paths["platstdlib"], "lib-dynload")]
    return [d for d in dict.fromkeys(found) if os.path.isdir(d)]


@contextmanager
def only_on_path(*directories: object) -> Iterator[None]:
    """``directories`` as ``sys.path`` (then the standard library), with the standard finders,
    ``PathFinder`` listing distributions as the standard library defines it: the
    ``importlib_metadata`` backport, once a library of this session has imported it, takes
    that away."""
    saved_path, saved_finders = sys.path[:], sys.meta_path[:]
    path_finder = importlib.machinery.PathFinder
    restored = not BACKPORT and not hasattr(path_finder, "find_distributions")
    if restored:
        path_finder.find_distributions = staticmethod(stdlib_find_distributions)  # type: ignore[attr-defined]
    entries: list[Any] = [str(d) if isinstance(d, Path) else d for d in directories]
    sys.path[:] = entries + standard_library()
    sys.meta_path[:] = standard_finders()
    try:
        yield
    finally:
        sys.path[:], sys.meta_path[:] = saved_path, saved_finders
        if restored:
            del path_finder.find_distributions  # type: ignore[attr-defined]


def stdlib_find_distributions(*args: Any, **kwargs: Any) -> Any:
    """``PathFinder.find_distributions`` of the standard library (3.10 and later)."""
    from importlib.metadata import MetadataPathFinder

    return MetadataPathFinder.find_distributions(*args, **kwargs)


@pytest.fixture
def alone(site: FakeSite) -> Iterator[FakeSite]:
    with only_on_path(site.path):
        yield site


def described(points: Optional[Sequence[Any]]) -> Reading:
    """What discovery uses of each entry point: name, value, group, the distribution's name and
    version, and the module and attribute path it loads."""
    if points is None:
        return None
    return [(ep.name, ep.value, ep.group, *identity(ep.dist), *target(ep)) for ep in points]


def identity(dist: Any) -> tuple[Optional[str], Optional[str]]:
    if isinstance(dist, SiteDistribution):
        return dist.name_and_version()
    fields = dist.metadata
    return (fields.get("Name"), fields.get("Version"))


def target(ep: Any) -> tuple[str, list[str]]:
    """The module an entry point loads and the attributes it follows there."""
    if isinstance(ep, SiteEntryPoint):
        return (ep._module, ep._attributes)
    found = metadata.EntryPoint.pattern.match(ep.value)
    if found is None:  # importlib.metadata's load() fails on it
        return ("<no module>", [])
    return (found.group("module"), [a for a in (found.group("attr") or "").split(".") if a])


def importlib_reading(group: str = "accelkit") -> Reading:
    """``importlib.metadata``'s answer, or None where its listing fails."""
    try:
        return described(list(metadata.entry_points(group=group)))
    except Exception:  # a malformed entry_points.txt fails its whole listing
        return None


def write_dist(directory: Path, folder: str, entry_points: Optional[str], headers: str) -> None:
    info = directory / folder
    info.mkdir()
    (info / "METADATA").write_text(headers)
    if entry_points is not None:
        (info / "entry_points.txt").write_text(entry_points)


@read_here
def test_the_built_ins_and_a_third_party_plugin_are_read_with_their_distributions(
    alone: FakeSite,
) -> None:
    alone.add("accelkit", {"nvidia": "accelkit_plugins.nvidia"}, version="0.1.0")
    alone.add("acme-widgets", {"acme": "acme_plugin:hooks.plugin"}, version="2.3")
    points = site_entry_points("accelkit")
    nvidia = ("nvidia", "accelkit_plugins.nvidia", "accelkit", "accelkit", "0.1.0")
    acme = ("acme", "acme_plugin:hooks.plugin", "accelkit", "acme-widgets", "2.3")
    assert sorted(described(points) or []) == [
        (*acme, "acme_plugin", ["hooks", "plugin"]),
        (*nvidia, "accelkit_plugins.nvidia", []),
    ]
    assert described(points) == importlib_reading()


@read_here
def test_an_entry_point_loads_the_module_or_the_object_its_value_names(alone: FakeSite) -> None:
    source = "class hooks:\n    plugin = 'the plugin object'\n"
    points = {"deep": "acme_plugin:hooks.plugin", "whole": "acme_plugin"}
    alone.add("acme", points, {"acme_plugin": source})
    loaded = {ep.name: ep.load() for ep in site_entry_points("accelkit") or []}
    assert loaded["deep"] == "the plugin object"
    assert loaded["whole"] is sys.modules["acme_plugin"]


@read_here
def test_other_groups_comments_and_lines_outside_a_section_are_not_entry_points(
    alone: FakeSite,
) -> None:
    text = "stray = line\n[console_scripts]\nacme = acme:main\n# [accelkit]\n[accelkit.x]\nx = y\n"
    write_dist(alone.path, "tool-1.0.dist-info", text + "[ accelkit ]\nz = w\n", "Name: tool\n")
    assert site_entry_points("accelkit") == []
    assert importlib_reading() == []
    assert [ep.name for ep in site_entry_points("console_scripts") or []] == ["acme"]


@read_here
def test_the_first_distribution_of_a_name_on_sys_path_hides_the_others(tmp_path: Path) -> None:
    first, later = FakeSite(tmp_path / "first"), FakeSite(tmp_path / "later")
    first.path.mkdir()
    later.path.mkdir()
    first.add("acme", {"acme": "acme_v2"}, version="2.0")
    later.add("Acme", {"acme": "acme_v1", "extra": "acme_extra"}, version="1.0")
    later.add("other", {"other": "other_plugin"})
    with only_on_path(first.path, tmp_path / "missing", later.path):
        reading = described(site_entry_points("accelkit"))
        assert reading == importlib_reading()
    assert reading == [
        ("acme", "acme_v2", "accelkit", "acme", "2.0", "acme_v2", []),
        ("other", "other_plugin", "accelkit", "other", "1.0", "other_plugin", []),
    ]


@pytest.mark.parametrize(
    "folder, entry_points",
    [
        ("broken-1.0.dist-info", b"[accelkit]\nx = \xff\xfe\n"),  # not UTF-8: importlib raises
        ("broken-1.0.dist-info", b"[console_scripts]\nno equals sign\n"),  # importlib raises
        ("odd-1.0.dist-info", b"[accelkit]\nodd = not a module path\n"),  # its load() fails
        ("LOUD-1.0.DIST-INFO", b"[accelkit]\nloud = loud_plugin\n"),  # named by its metadata
        (".dist-info", b"[accelkit]\nnameless = nameless_plugin\n"),  # named by its metadata
    ],
)
def test_what_importlib_metadata_might_read_otherwise_is_left_to_it(
    alone: FakeSite, folder: str, entry_points: bytes
) -> None:
    alone.add("acme", {"acme": "acme_plugin"})
    info = alone.path / folder
    info.mkdir()
    (info / "METADATA").write_text("Name: other\nVersion: 3\n")
    (info / "entry_points.txt").write_bytes(entry_points)
    assert site_entry_points("accelkit") is None
    reading = importlib_reading()
    if reading is not None:  # where importlib.metadata can list them, discovery gets its list
        assert described(installed_entry_points()) == reading


@read_here
def test_a_zip_an_egg_or_a_path_that_is_not_text_is_left_to_importlib_metadata(
    alone: FakeSite, tmp_path: Path
) -> None:
    alone.add("acme", {"acme": "acme_plugin"})
    archive = tmp_path / "plugins.zip"
    with zipfile.ZipFile(archive, "w") as handle:
        handle.writestr("zipped-1.0.dist-info/METADATA", "Name: zipped\nVersion: 1.0\n")
        handle.writestr("zipped-1.0.dist-info/entry_points.txt", "[accelkit]\nzipped = zipped\n")
    egg = tmp_path / "acme-1.0.egg"
    egg.mkdir()
    for entry in (archive, egg, Path(tmp_path / "plugins").as_posix().encode()):
        with only_on_path(alone.path, entry):
            assert site_entry_points("accelkit") is None
    with only_on_path(alone.path, tmp_path / "missing.zip"):
        assert [ep.name for ep in site_entry_points("accelkit") or []] == ["acme"]
    with only_on_path(alone.path, archive):  # discovery still finds the zipped plugin
        assert sorted(ep.name for ep in installed_entry_points()) == ["acme", "zipped"]


@read_here
def test_another_distribution_finder_is_left_to_importlib_metadata(alone: FakeSite) -> None:
    class Finder:
        @staticmethod
        def find_distributions(*args: Any, **kwargs: Any) -> list[Any]:
            return []

    alone.add("acme", {"acme": "acme_plugin"})
    sys.meta_path.append(Finder)
    assert site_entry_points("accelkit") is None
    sys.meta_path.remove(Finder)
    assert site_entry_points("accelkit") is not None


@pytest.mark.parametrize(
    "headers, read_here",
    [
        ("Metadata-Version: 2.1\nName: acme-widgets\nVersion: 1.0\n\nName: in the body\n", True),
        ("name: acme\nName: second\nVERSION:\t 2.0  \nVersion: 3\n", True),  # the first wins
        ("Metadata-Version: 2.1\nSummary: no name\n", True),
        ("Metadata-Version: 2.1\nName: acme-widgets\n  continued\nVersion: 1.0\n", False),
        ("Metadata-Version: 2.1\nnot a header line\nName: acme-widgets\nVersion: 1.0\n", False),
        ("From someone\nName: acme-widgets\nVersion: 1.0\n", False),
        ("", True),  # an empty METADATA: PKG-INFO is read, as importlib.metadata reads it
    ],
)
def test_a_distribution_s_name_and_version_are_importlib_metadata_s(
    tmp_path: Path, headers: str, read_here: bool
) -> None:
    write_dist(tmp_path, "acme_widgets-1.0.dist-info", None, headers)
    info = tmp_path / "acme_widgets-1.0.dist-info"
    if not headers:
        (info / "PKG-INFO").write_text("Name: from-pkg-info\nVersion: 9\n")
    fields = metadata.Distribution.at(info).metadata
    expected = (fields.get("Name"), fields.get("Version"))
    assert SiteDistribution(str(info)).name_and_version() == expected
    if read_here:  # without asking importlib.metadata
        assert _sites._name_and_version(str(info)) == expected
    else:
        with pytest.raises(_sites.Uncertain):
            _sites._name_and_version(str(info))


def test_a_fresh_interpreter_finds_a_third_party_plugin_without_importlib_metadata(
    tmp_path: Path,
) -> None:
    """With a vendor plugin installed, discovery never imports ``importlib.metadata`` (25 ms of
    a 60 ms ``accelkit ls`` in a wheel venv): the plugin loads and names its distribution, and
    the reading equals the one discovery would otherwise ask for (the backport's on 3.9), for
    every distribution of this test environment."""
    site = FakeSite(tmp_path)
    plugin = {"widgetco_plugin": manager_module("widgetco")}
    site.add("widgetco", {"widgetco": "widgetco_plugin"}, plugin)
    script = """
import json, sys, accelkit
from accelkit.registry._sites import site_entry_points
registry = accelkit.Registry()
accelkit.detect_node(accelkit.FakeHost(), registry=registry)
modules = sorted(sys.modules)
plugins = [[p.name, p.dist, p.version, p.status] for p in registry.report()]
ours = [[ep.name, ep.value, *ep.dist.name_and_version()] for ep in site_entry_points("accelkit")]
from accelkit._distributions import metadata
theirs = [
    [ep.name, ep.value, ep.dist.metadata.get("Name"), ep.dist.metadata.get("Version")]
    for ep in metadata.entry_points(group="accelkit")
]
print(json.dumps({"plugins": plugins, "modules": modules, "ours": ours, "theirs": theirs}))
"""
    env = {k: v for k, v in os.environ.items() if k not in PLUGIN_VARS}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert ["widgetco", "widgetco", "1.0", "ok"] in found["plugins"]
    assert not {"importlib.metadata", "importlib_metadata", "email"} & set(found["modules"])
    assert ["widgetco", "widgetco_plugin", "widgetco", "1.0"] in found["ours"]
    assert found["ours"] == found["theirs"]


# Distributions made of parts that importlib.metadata reads in its own ways.
NAMES = ("acme", "Acme", "ac.me", "ac-me", "ac_me", "widget", "")
VERSIONS = ("1.0", "2.0", "")
SUFFIXES = (".dist-info", ".egg-info", ".DIST-INFO", ".Egg-Info")
LINES = (
    "[accelkit]",
    "[ accelkit ]",
    "[console_scripts]",
    "[accelkit.x]",
    "acme = acme_plugin",
    "acme=acme_plugin:obj.attr",
    "  other = pkg.mod : obj [extra]  ",
    "# comment",
    "; semi = x",
    "",
    "broken line",
    "bad = not a value!",
    "x = y = z",
    "dup = pkg",
)
HEADERS = (
    "Metadata-Version: 2.1",
    "Name: acme",
    "name: Other",
    "Version: 1.0",
    "VERSION:\t2.0  ",
    "Name:",
    " folded",
    "Summary: x: y",
    "not a header",
    "",
)


def distributions(lines: Sequence[str], headers: Sequence[str]) -> st.SearchStrategy[Any]:
    """A directory's distributions: folder name, entry_points.txt (or none) and METADATA."""
    folder = st.builds(
        lambda name, version, suffix: f"{name}{'-' if version else ''}{version}{suffix}",
        st.sampled_from(NAMES),
        st.sampled_from(VERSIONS),
        st.sampled_from(SUFFIXES),
    )
    text = st.none() | st.lists(st.sampled_from(lines), max_size=8).map("\n".join)
    metadata_text = st.lists(st.sampled_from(headers), max_size=6).map("\n".join)
    return st.dictionaries(folder, st.tuples(text, metadata_text), max_size=4)


def build_sites(root: str, sites: Sequence[Mapping[str, tuple[Optional[str], str]]]) -> list[Path]:
    directories = []
    for number, dists in enumerate(sites):
        directory = Path(root, f"site{number}")
        directory.mkdir()
        for folder, (entry_points, headers) in dists.items():
            write_dist(directory, folder, entry_points, headers)
        directories.append(directory)
    return directories


@pytest.mark.filterwarnings("ignore:Implicit None:DeprecationWarning")  # 3.12+, a missing Name
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(distributions(LINES, HEADERS), min_size=1, max_size=3))
def test_any_reading_given_is_importlib_metadata_s(
    sites: list[dict[str, tuple[Optional[str], str]]],
) -> None:
    with tempfile.TemporaryDirectory() as root:
        directories = build_sites(root, sites)
        with only_on_path(*directories):
            expected = importlib_reading()
            reading = described(site_entry_points("accelkit"))
            if reading is not None:
                assert reading == expected
            if expected is not None:
                assert described(installed_entry_points()) == expected


WELL_FORMED_LINES = (
    "[accelkit]",
    "[ accelkit ]",
    "[console_scripts]",
    "acme = acme_plugin",
    "  x=pkg.mod : obj.attr [extra]  ",
    "; semi = x",
    "# comment",
    "",
)
WELL_FORMED_HEADERS = ("Metadata-Version: 2.1", "Name: acme", "name: Other", "Version: 2.0  ")


@read_here
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(distributions(WELL_FORMED_LINES, WELL_FORMED_HEADERS), min_size=1, max_size=3))
def test_well_formed_distributions_are_read_without_importlib_metadata(
    sites: list[dict[str, tuple[Optional[str], str]]],
) -> None:
    """Folders named as installers name them, files as they write them: always answered."""
    named = (".dist-info", ".egg-info")
    sites = [
        {f: d for f, d in dists.items() if f.endswith(named) and f[0] not in ".-"}
        for dists in sites
    ]
    with tempfile.TemporaryDirectory() as root, only_on_path(*build_sites(root, sites)):
        reading = described(site_entry_points("accelkit"))
        assert reading is not None
        assert reading == importlib_reading()
