"""The isolated loader: built-ins, fake third-party distributions, failures, policy variables."""

from __future__ import annotations

import json
import os
import random
from types import SimpleNamespace
from typing import Any

import accelkit
import pytest
from accelkit import registry
from fake_dists import FakeSite, manager_module

BUILTIN_FAMILIES = ["nvidia", "amd", "intel", "neuron", "tpu", "gaudi", "ascend"]


def report() -> dict[str, registry.PluginInfo]:
    return {info.name: info for info in registry.plugin_report()}


def families() -> list[str]:
    return [m.name for m in registry.managers()]


# -- built-ins -------------------------------------------------------------------------------
def test_builtins_load_in_tuple_order_without_any_entry_point(site: FakeSite) -> None:
    infos = registry.plugin_report()
    assert [i.module for i in infos] == list(registry.BUILTIN_PLUGINS)
    assert [i.name for i in infos] == [*BUILTIN_FAMILIES, "hints"]
    assert {(i.origin, i.dist, i.status) for i in infos} == {("builtin", "accelkit", "ok")}, [
        i.error for i in infos if i.error
    ]
    assert families() == BUILTIN_FAMILIES
    assert report()["hints"].families == ()
    assert registry.get_manager("tpu").resource_name == "TPU"


def test_an_entry_point_naming_a_builtin_module_is_that_builtin(site: FakeSite) -> None:
    site.add(
        "accelkit-mirror", {"nvidia": "accelkit_plugins.nvidia", "gpu": "accelkit_plugins.amd"}
    )
    assert [i.name for i in registry.plugin_report()] == [*BUILTIN_FAMILIES, "hints"]
    assert families() == BUILTIN_FAMILIES


# -- third parties ---------------------------------------------------------------------------
def test_third_parties_follow_the_builtins_sorted_by_entry_point_name(site: FakeSite) -> None:
    site.add("zz-dist", {"alpha": "alpha_plugin"}, {"alpha_plugin": manager_module("alpha")})
    site.add("aa-dist", {"zeta": "zeta_plugin"}, {"zeta_plugin": manager_module("zeta")})
    infos = registry.plugin_report()
    assert [i.name for i in infos][-2:] == ["alpha", "zeta"]
    alpha = report()["alpha"]
    assert (alpha.origin, alpha.dist, alpha.version, alpha.status) == (
        "entry-point",
        "zz-dist",
        "1.0",
        "ok",
    )
    assert alpha.module == "alpha_plugin"
    assert families() == [*BUILTIN_FAMILIES, "alpha", "zeta"]
    assert registry.get_manager("zeta").name == "zeta"


def test_order_does_not_depend_on_entry_point_order(
    site: FakeSite, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("delta", "bravo", "echo", "alpha", "charlie"):
        site.add(f"dist-{name}", {name: f"{name}_mod"}, {f"{name}_mod": manager_module(name)})
    points = site.entry_points()
    random.Random(7).shuffle(points)
    registry.set_default(registry.Registry(entry_points=lambda: points))
    assert families()[len(BUILTIN_FAMILIES) :] == ["alpha", "bravo", "charlie", "delta", "echo"]


def test_an_object_entry_point_is_registered_like_a_module(site: FakeSite) -> None:
    source = """
    from accelkit import AcceleratorManager, hookimpl

    class Manager(AcceleratorManager):
        name = "objfam"
        resource_name = "OBJ"
        def detect(self, host):
            return []

    class Plugin:
        @hookimpl
        def accelkit_register_managers(self):
            return [Manager()]

    plugin = Plugin()
    """
    site.add("obj-dist", {"obj": "obj_mod:plugin"}, {"obj_mod": source})
    assert report()["obj"].module == "obj_mod:plugin"
    assert registry.get_manager("objfam").resource_name == "OBJ"


# -- failures are reported with the distribution and skipped ---------------------------------
def test_a_plugin_that_fails_to_import_is_reported_and_the_others_load(site: FakeSite) -> None:
    site.add("bad-dist", {"bad": "bad_mod"}, {"bad_mod": "import no_such_module_xyz\n"}, "2.5")
    site.add("good-dist", {"good": "good_mod"}, {"good_mod": manager_module("good")})
    with pytest.warns(registry.PluginWarning, match=r"'bad' \(bad-dist 2\.5\) was skipped"):
        info = report()["bad"]
    assert info.status == "error"
    assert info.error == "import failed: ModuleNotFoundError: No module named 'no_such_module_xyz'"
    assert (info.dist, info.version) == ("bad-dist", "2.5")
    assert families()[-1] == "good"


def test_a_raising_register_hook_is_reported_and_the_others_still_register(
    site: FakeSite,
) -> None:
    raising = """
    from accelkit import hookimpl

    @hookimpl
    def accelkit_register_managers():
        raise RuntimeError("driver exploded")
    """
    site.add("boom-dist", {"boom": "boom_mod"}, {"boom_mod": raising})
    site.add("good-dist", {"good": "good_mod"}, {"good_mod": manager_module("good")})
    with pytest.warns(registry.PluginWarning, match="boom-dist"):
        info = report()["boom"]
    assert info.status == "error"
    assert info.error == "accelkit_register_managers raised RuntimeError: driver exploded"
    assert families() == [*BUILTIN_FAMILIES, "good"]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param(
            "from accelkit import hookimpl\n"
            "@hookimpl\ndef accelkit_register_managers(config):\n    return []\n",
            "does not match the accelkit hookspecs",
            id="argument-not-in-hookspec",
        ),
        pytest.param(
            "from accelkit import hookimpl\n@hookimpl\ndef accelkit_register_manager():\n"
            "    return []\n",
            "unknown hook(s) accelkit_register_manager; known hooks: accelkit_node_labels, "
            "accelkit_register_managers, accelkit_worker_env",
            id="unknown-hook-name",
        ),
        pytest.param(
            "def accelkit_register_managers():\n    return []\n",
            "implements no accelkit hook; mark one of",
            id="missing-hookimpl-marker",
        ),
        pytest.param(
            "from accelkit import hookimpl\n@hookimpl(wrapper=True)\n"
            "def accelkit_worker_env(grant, env):\n    return (yield)\n",
            "accelkit_worker_env is a hook wrapper",
            id="hook-wrapper",
        ),
    ],
)
def test_a_plugin_that_does_not_match_the_hookspecs_is_rejected(
    site: FakeSite, source: str, expected: str
) -> None:
    site.add("odd-dist", {"odd": "odd_mod"}, {"odd_mod": source})
    with pytest.warns(registry.PluginWarning, match="odd-dist"):
        info = report()["odd"]
    assert info.status == "error"
    assert info.error is not None and expected in info.error
    assert families() == BUILTIN_FAMILIES


def test_the_hookspec_error_names_the_unexpected_argument(site: FakeSite) -> None:
    source = "from accelkit import hookimpl\n@hookimpl\ndef accelkit_node_labels(node, rack):\n"
    site.add("odd-dist", {"odd": "odd_mod"}, {"odd_mod": source + "    return {}\n"})
    with pytest.warns(registry.PluginWarning):
        error = report()["odd"].error
    assert error is not None and "rack" in error and "\n" not in error


MANAGER_HEADER = """
from accelkit import AcceleratorManager, hookimpl

class Good(AcceleratorManager):
    name = "good"
    resource_name = "GOOD"
    def detect(self, host):
        return []

class Nameless(AcceleratorManager):
    name = "Not A Family"
    resource_name = "GOOD"
    def detect(self, host):
        return []

class NoTotal(Good):
    api_version = 2
    def visibility_env(self, ids):
        return {}

@hookimpl
def accelkit_register_managers():
"""


@pytest.mark.parametrize(
    ("returned", "expected"),
    [
        ("None", "accelkit_register_managers returned None; return a list of manager instances"),
        ("Good()", "accelkit_register_managers returned <Good good:GOOD>; return a list"),
        ("[Good]", "returned the class Good, not an instance Good()"),
        ("[Good(), 'x']", "returned 'x', which is not an AcceleratorManager"),
        ("[Nameless()]", "Nameless.name must be a lowercase identifier like 'nvidia'"),
        ("[Good(), Good()]", "returns two managers for family 'good'"),
        ("[NoTotal()]", "NoTotal.visibility_env must take the keyword total"),
    ],
)
def test_a_plugin_returning_invalid_managers_is_rejected(
    site: FakeSite, returned: str, expected: str
) -> None:
    site.add(
        "mgr-dist", {"mgr": "mgr_mod"}, {"mgr_mod": MANAGER_HEADER + f"    return {returned}\n"}
    )
    with pytest.warns(registry.PluginWarning, match="mgr-dist"):
        info = report()["mgr"]
    assert info.status == "error"
    assert info.error is not None and expected in info.error
    assert "good" not in families()


def test_a_plugin_that_uses_discovery_while_loading_fails_alone(site: FakeSite) -> None:
    source = """
    import accelkit
    from accelkit import hookimpl

    @hookimpl
    def accelkit_register_managers():
        return [accelkit.get_manager("nvidia")]
    """
    site.add("loop-dist", {"loop": "loop_mod"}, {"loop_mod": source})
    with pytest.warns(registry.PluginWarning):
        info = report()["loop"]
    assert info.error == (
        "accelkit_register_managers raised PluginError: a plugin used accelkit discovery while "
        "it was being loaded"
    )
    assert families() == BUILTIN_FAMILIES


# -- families: duplicates and replacement ----------------------------------------------------
def test_two_claims_on_a_family_keep_the_first_and_name_both(site: FakeSite) -> None:
    site.add("first-dist", {"a-widget": "a_widget"}, {"a_widget": manager_module("widget")})
    site.add("second-dist", {"b-widget": "b_widget"}, {"b_widget": manager_module("widget")}, "3.1")
    with pytest.warns(registry.PluginWarning, match="second-dist"):
        infos = report()
    assert infos["a-widget"].status == "ok"
    loser = infos["b-widget"]
    assert loser.status == "error"
    assert loser.error == (
        "family 'widget' is claimed by plugin 'a-widget' (first-dist 1.0) and by plugin "
        "'b-widget' (second-dist 3.1); the first keeps it. Uninstall one or block one with "
        "ACCELKIT_DISABLE_PLUGINS=b-widget (or ACCELKIT_DISABLE_PLUGINS=a-widget, to use the "
        "second)"
    )
    assert loser.families == ("widget",)
    assert registry.get_manager("widget").__module__ == "a_widget"


def test_claiming_a_builtin_family_without_replaces_is_an_error(site: FakeSite) -> None:
    site.add("vendor-dist", {"vendor-gpu": "vendor_gpu"}, {"vendor_gpu": manager_module("nvidia")})
    with pytest.warns(registry.PluginWarning):
        info = report()["vendor-gpu"]
    assert info.status == "error"
    assert info.error is not None
    assert "family 'nvidia' is claimed by plugin 'nvidia' (accelkit" in info.error
    assert "declare replaces = 'nvidia'" in info.error
    # the user who installed the vendor's plugin to use it is told how (guide, section 8)
    assert "or ACCELKIT_DISABLE_PLUGINS=nvidia, to use the second" in info.error
    assert registry.get_manager("nvidia").__module__ == "accelkit_plugins.nvidia"


def test_replaces_takes_over_a_builtin_family_in_its_place(site: FakeSite) -> None:
    module = manager_module("nvidia", resource="GPU", replaces="nvidia")
    site.add("nvidia-accelkit", {"nvidia-vendor": "vendor_nv"}, {"vendor_nv": module}, "9.0")
    infos = report()
    assert infos["nvidia"].status == "replaced"
    assert infos["nvidia"].error == "replaced by plugin 'nvidia-vendor' (nvidia-accelkit 9.0)"
    assert infos["nvidia-vendor"].status == "ok"
    assert registry.get_manager("nvidia").__module__ == "vendor_nv"
    assert families() == BUILTIN_FAMILIES, "the replacement keeps the built-in's place"


def test_two_replacements_of_one_builtin_are_an_error(site: FakeSite) -> None:
    module = manager_module("amd", resource="GPU", replaces="amd")
    site.add("one-dist", {"amd-one": "amd_one"}, {"amd_one": module})
    site.add("two-dist", {"amd-two": "amd_two"}, {"amd_two": module})
    with pytest.warns(registry.PluginWarning, match="two-dist"):
        infos = report()
    assert infos["amd"].error == "replaced by plugin 'amd-one' (one-dist 1.0)"
    assert infos["amd-two"].status == "error"
    assert infos["amd-two"].error is not None
    assert "claimed by plugin 'amd-one' (one-dist 1.0) and by plugin 'amd-two'" in (
        infos["amd-two"].error
    )


def test_replaces_must_name_the_managers_own_family(site: FakeSite) -> None:
    module = manager_module("nvgpu", resource="GPU", replaces="nvidia")
    site.add("odd-dist", {"nvgpu": "nvgpu_mod"}, {"nvgpu_mod": module})
    with pytest.warns(registry.PluginWarning):
        info = report()["nvgpu"]
    assert info.error is not None and "Manager.replaces is 'nvidia' but its name is 'nvgpu'" in (
        info.error
    )
    assert report()["nvidia"].status == "ok"


def test_a_plugin_name_is_unique(site: FakeSite) -> None:
    site.add("other-dist", {"nvidia": "other_nv"}, {"other_nv": manager_module("othernv")})
    with pytest.warns(registry.PluginWarning):
        infos = registry.plugin_report()
    clash = [i for i in infos if i.name == "nvidia"]
    assert [i.status for i in clash] == ["ok", "error"]
    assert clash[1].error is not None
    assert "already taken by plugin 'nvidia' (accelkit" in clash[1].error


def test_a_vendor_plugin_may_take_the_name_of_the_builtin_it_replaces(site: FakeSite) -> None:
    """NVIDIA's own plugin, registered as `nvidia` (the docs say: name it after the family)."""
    module = manager_module("nvidia", resource="GPU", replaces="nvidia")
    site.add("accelkit-nvidia", {"nvidia": "accelkit_nvidia"}, {"accelkit_nvidia": module}, "2.0")
    infos = registry.plugin_report()
    nvidia = [(i.origin, i.dist, i.status) for i in infos if i.name == "nvidia"]
    assert nvidia == [
        ("builtin", "accelkit", "replaced"),
        ("entry-point", "accelkit-nvidia", "ok"),
    ]
    assert registry.get_manager("nvidia").__module__ == "accelkit_nvidia"
    assert families() == BUILTIN_FAMILIES


def test_a_plugin_named_like_a_builtin_it_does_not_replace_is_an_error(site: FakeSite) -> None:
    site.add("accelkit-nv2", {"nvidia": "nv_two"}, {"nv_two": manager_module("nvidia", "GPU")})
    with pytest.warns(registry.PluginWarning, match="accelkit-nv2"):
        infos = [i for i in registry.plugin_report() if i.name == "nvidia"]
    assert [i.status for i in infos] == ["ok", "error"]
    assert infos[1].error is not None
    assert "already taken by plugin 'nvidia' (accelkit" in infos[1].error
    assert "replaces = 'nvidia'" in infos[1].error
    assert registry.get_manager("nvidia").__module__ == "accelkit_plugins.nvidia"


# -- policy variables ------------------------------------------------------------------------
def test_disabled_builtin_frees_its_family_for_a_third_party(
    site: FakeSite, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACCELKIT_DISABLE_PLUGINS", " nvidia , hints")
    site.add("vendor-dist", {"vendor-gpu": "vendor_gpu"}, {"vendor_gpu": manager_module("nvidia")})
    infos = report()
    assert infos["nvidia"].status == infos["hints"].status == "disabled"
    assert infos["nvidia"].error == "blocked by ACCELKIT_DISABLE_PLUGINS"
    assert infos["vendor-gpu"].status == "ok"
    assert families() == [*BUILTIN_FAMILIES[1:], "nvidia"]


def test_a_disabled_family_is_unknown_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACCELKIT_DISABLE_PLUGINS", "gaudi")
    with pytest.raises(KeyError) as caught:
        registry.get_manager("gaudi")
    assert isinstance(caught.value, registry.UnknownFamily)
    assert str(caught.value) == (
        "no accelerator family 'gaudi'; known: nvidia, amd, intel, neuron, tpu, ascend. "
        "plugin 'gaudi' (accelkit 0.1.0, built-in) is not in use (disabled): blocked by "
        "ACCELKIT_DISABLE_PLUGINS"
    )


def test_an_unknown_family_lists_the_known_ones() -> None:
    with pytest.raises(KeyError, match="no accelerator family 'cuda'; known: nvidia, amd"):
        accelkit.get_manager("cuda")


def test_the_family_of_a_failed_plugin_says_why_it_is_missing(site: FakeSite) -> None:
    site.add("acme-dist", {"acme": "acme_mod"}, {"acme_mod": "raise OSError('no driver')\n"})
    with pytest.warns(registry.PluginWarning), pytest.raises(KeyError) as caught:
        registry.get_manager("acme")
    assert "plugin 'acme' (acme-dist 1.0) is not in use (error): import failed: OSError: " in str(
        caught.value
    )


def test_disabling_a_third_party_plugin(site: FakeSite, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACCELKIT_DISABLE_PLUGINS", "widget")
    site.add("w-dist", {"widget": "widget_mod"}, {"widget_mod": "raise SystemError('never')\n"})
    assert report()["widget"].status == "disabled"
    assert families() == BUILTIN_FAMILIES


def test_autoload_off_loads_builtins_and_scans_no_entry_point(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ACCELKIT_DISABLE_PLUGIN_AUTOLOAD", "1")

    def refuse() -> list[Any]:
        raise AssertionError("entry points scanned with autoload off")

    registry.set_default(registry.Registry(entry_points=refuse))
    assert families() == BUILTIN_FAMILIES
    assert not registry.autoload_enabled(os.environ)


@pytest.mark.parametrize("value", ["0", "false", "", "off"])
def test_autoload_stays_on_for_false_values(
    site: FakeSite, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("ACCELKIT_DISABLE_PLUGIN_AUTOLOAD", value)
    site.add("w-dist", {"widget": "widget_mod"}, {"widget_mod": manager_module("widget")})
    assert families()[-1] == "widget"


def test_autoload_off_still_loads_a_required_third_party(
    site: FakeSite, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACCELKIT_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("ACCELKIT_REQUIRE_PLUGINS", "widget")
    site.add("w-dist", {"widget": "widget_mod"}, {"widget_mod": manager_module("widget")})
    site.add("g-dist", {"gadget": "gadget_mod"}, {"gadget_mod": manager_module("gadget")})
    assert families() == [*BUILTIN_FAMILIES, "widget"]


def test_a_required_plugin_that_fails_raises_plugin_error(
    site: FakeSite, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACCELKIT_REQUIRE_PLUGINS", "acme")
    site.add("acme-dist", {"acme": "acme_mod"}, {"acme_mod": "import no_acme_driver\n"}, "0.3")
    expected = (
        "ACCELKIT_REQUIRE_PLUGINS names plugins that are not in use: plugin 'acme' (acme-dist "
        "0.3) is not in use (error): import failed: ModuleNotFoundError: No module named "
        "'no_acme_driver'"
    )
    with pytest.raises(accelkit.PluginError) as caught:
        registry.managers()
    assert str(caught.value) == expected
    with pytest.raises(accelkit.PluginError):
        registry.get_manager("nvidia")
    with pytest.raises(accelkit.PluginError):
        registry.default_registry().worker_env(accelkit.Grant(0, {}, []), {})
    assert report()["acme"].status == "error", "the report still answers"


def test_a_required_plugin_that_is_missing_or_disabled_raises(
    site: FakeSite, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACCELKIT_REQUIRE_PLUGINS", "nvidia,ghost")
    monkeypatch.setenv("ACCELKIT_DISABLE_PLUGINS", "nvidia")
    with pytest.raises(accelkit.PluginError) as caught:
        registry.managers()
    message = str(caught.value)
    assert "plugin 'nvidia' (accelkit 0.1.0, built-in) is not in use (disabled)" in message
    assert "'ghost' is not installed: no entry point named 'ghost' in group 'accelkit'" in message


def test_required_plugins_that_load_change_nothing(
    site: FakeSite, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACCELKIT_REQUIRE_PLUGINS", "tpu,widget")
    site.add("w-dist", {"widget": "widget_mod"}, {"widget_mod": manager_module("widget")})
    assert families() == [*BUILTIN_FAMILIES, "widget"]


# -- caching ---------------------------------------------------------------------------------
def test_discovery_runs_once_until_reset(site: FakeSite, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def counted() -> list[Any]:
        calls.append(1)
        return site.entry_points()

    registry.set_default(registry.Registry(entry_points=counted))
    site.add("w-dist", {"widget": "widget_mod"}, {"widget_mod": manager_module("widget")})
    first = registry.managers()
    assert registry.managers() == first
    assert registry.get_manager("widget") is first[-1]
    registry.plugin_report()
    assert len(calls) == 1
    monkeypatch.setenv("ACCELKIT_DISABLE_PLUGINS", "widget")
    assert families()[-1] == "widget", "the environment is read when discovery runs"
    registry.set_default(registry.Registry(entry_points=counted))
    assert families() == BUILTIN_FAMILIES
    assert len(calls) == 2


def test_plugin_info_is_json_ready_and_frozen(site: FakeSite) -> None:
    info = report()["nvidia"]
    data = json.loads(json.dumps(info.to_dict()))
    assert data == {
        "name": "nvidia",
        "module": "accelkit_plugins.nvidia",
        "origin": "builtin",
        "dist": "accelkit",
        "version": accelkit.__version__,
        "status": "ok",
        "error": None,
        "families": ["nvidia"],
        "problems": [],
        "notes": [],
    }
    with pytest.raises(AttributeError):
        info.status = "error"  # type: ignore[misc]


def test_an_entry_point_naming_a_missing_object_is_reported_alone(site: FakeSite) -> None:
    site.add("odd-dist", {"odd": "odd_mod:missing"}, {"odd_mod": "present = 1\n"})
    site.add("w-dist", {"widget": "widget_mod"}, {"widget_mod": manager_module("widget")})
    with pytest.warns(registry.PluginWarning, match="odd-dist"):
        info = report()["odd"]
    assert (info.status, info.module) == ("error", "odd_mod:missing")
    assert (
        info.error == "import failed: AttributeError: module 'odd_mod' has no attribute 'missing'"
    )
    assert families()[-1] == "widget"


def test_unreadable_metadata_still_leaves_the_builtins(monkeypatch: pytest.MonkeyPatch) -> None:
    def corrupt() -> list[Any]:
        raise ValueError("bad METADATA in some-package")

    registry.set_default(registry.Registry(entry_points=corrupt))
    with pytest.warns(registry.PluginWarning, match="bad METADATA in some-package"):
        assert families() == BUILTIN_FAMILIES


def test_each_distribution_s_metadata_is_read_once(site: FakeSite) -> None:
    site.add(
        "two-dist",
        {"beta": "beta_plugin", "gamma": "gamma_plugin"},
        {
            "beta_plugin": manager_module("beta"),
            "gamma_plugin": manager_module("gamma"),
        },
    )
    reads: list[str] = []

    class Counted:
        """The distribution of the site's entry points, counting how often its metadata is read."""

        def __init__(self, dist: Any) -> None:
            self._dist = dist

        @property
        def metadata(self) -> Any:
            reads.append(self._dist.metadata["Name"])
            return self._dist.metadata

    counted: dict[int, Counted] = {}

    def entry_points() -> list[Any]:
        points = []
        for ep in site.entry_points():
            dist = counted.setdefault(id(ep.dist), Counted(ep.dist))
            points.append(SimpleNamespace(name=ep.name, value=ep.value, load=ep.load, dist=dist))
        return points

    registry.set_default(registry.Registry(entry_points=entry_points))
    infos = report()
    assert [(infos[n].dist, infos[n].version) for n in ("beta", "gamma")] == [
        ("two-dist", "1.0")
    ] * 2
    assert reads == ["two-dist"]


def test_the_registry_plugin_manager_finds_what_pluggy_finds() -> None:
    """Ruling out a module's plain names early (a start-up cut) must not lose a hook: every
    built-in, a module holding a bound method as its hook, and a plugin object register the same
    implementations as with pluggy's own manager."""
    import importlib
    import types

    import pluggy
    from accelkit import hookimpl, hookspecs
    from accelkit.registry._loading import BUILTIN_PLUGINS, PluginManager

    class Labels:
        @hookimpl
        def accelkit_node_labels(self, node: object) -> dict[str, str]:
            return {}

    bound = types.ModuleType("bound_hook")
    bound.accelkit_node_labels = Labels().accelkit_node_labels  # type: ignore[attr-defined]
    bound.CONSTANT = 3  # type: ignore[attr-defined]
    plugins = [importlib.import_module(m) for m in BUILTIN_PLUGINS] + [bound, Labels()]

    def implemented(manager: pluggy.PluginManager) -> list[list[str]]:
        manager.add_hookspecs(hookspecs)
        for plugin in plugins:
            manager.register(plugin)
        return [sorted(c.name for c in manager.get_hookcallers(p) or []) for p in plugins]

    ours = implemented(PluginManager(hookspecs.PROJECT))
    assert ours == implemented(pluggy.PluginManager(hookspecs.PROJECT))
    assert ours[0] == ["accelkit_register_managers"] and ours[-2:] == [["accelkit_node_labels"]] * 2
