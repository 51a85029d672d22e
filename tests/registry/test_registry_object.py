"""A Registry is one set of plugins, chosen by its caller and passed along: no global state."""

from __future__ import annotations

import importlib
import threading

import accelkit
import pytest
from accelkit import AcceleratorManager, Device, Host, Registry, hookimpl
from accelkit.detect import is_index
from accelkit.registry import BUILTIN_PLUGINS


class WidgetManager(AcceleratorManager):
    name = "widget"
    resource_name = "WPU"
    visible_devices_env_var = "WIDGET_VISIBLE_DEVICES"

    def detect(self, host: Host) -> list[Device]:
        return [Device(str(n)) for n in range(int(host.env.get("WIDGETS", "2")))]


class WidgetPlugin:
    @hookimpl
    def accelkit_register_managers(self) -> list[AcceleratorManager]:
        return [WidgetManager()]


def test_a_scheduler_chooses_its_plugins_and_every_stage_uses_them() -> None:
    plugins = Registry([WidgetPlugin()], autoload=False)
    assert [m.name for m in plugins.managers()] == ["widget"]
    assert [(i.name, i.origin, i.status) for i in plugins.report()] == [
        ("WidgetPlugin", "given", "ok")
    ]
    # named by its module, not "(? ?)": a plugin given to a registry may have no distribution
    assert plugins.report()[0].describe() == (
        f"plugin 'WidgetPlugin' (module {__name__}.WidgetPlugin, given to the registry)"
    )
    node = accelkit.detect_node(accelkit.FakeHost(), registry=plugins)
    assert node.resources == {"WPU": 2.0}
    grant = accelkit.Allocator(node, registry=plugins).acquire({"WPU": 1})
    assert grant is not None
    env = grant.env({}, registry=plugins)
    assert env == {"WIDGET_VISIBLE_DEVICES": "0"}
    assert accelkit.visible_ids(env, registry=plugins) == {"widget": ["0"]}
    assert accelkit.validate_request({"WPU": 0.5}, node, registry=plugins) == {"WPU": 5000}
    with pytest.raises(KeyError, match="no accelerator family 'nvidia'; known: widget"):
        plugins.get_manager("nvidia")


def test_the_default_registry_is_untouched_by_an_explicit_one() -> None:
    Registry([WidgetPlugin()], autoload=False).managers()
    assert "widget" not in [m.name for m in accelkit.managers()]


def test_built_in_modules_given_explicitly_are_built_ins() -> None:
    modules = [importlib.import_module(name) for name in BUILTIN_PLUGINS[:2]]
    plugins = Registry(modules, autoload=False)
    assert [(i.name, i.origin, i.dist) for i in plugins.report()] == [
        ("nvidia", "builtin", "accelkit"),
        ("amd", "builtin", "accelkit"),
    ]


def test_operators_switches_apply_to_every_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    plugins = Registry([WidgetPlugin()], autoload=False, env={"ACCELKIT_DISABLE_PLUGINS": "x"})
    assert [m.name for m in plugins.managers()] == ["widget"]
    blocked = Registry(
        [WidgetPlugin()], autoload=False, env={"ACCELKIT_DISABLE_PLUGINS": "WidgetPlugin"}
    )
    assert blocked.managers() == []
    assert blocked.report()[0].status == "disabled"
    with pytest.raises(accelkit.ConfigurationError, match="ACCELKIT_TRACE_PLUGINS='maybe'"):
        Registry([], env={"ACCELKIT_TRACE_PLUGINS": "maybe"}).managers()


def test_a_registry_loads_once_however_many_threads_ask() -> None:
    loads: list[int] = []

    class Counted(WidgetPlugin):
        @hookimpl
        def accelkit_register_managers(self) -> list[AcceleratorManager]:
            loads.append(1)
            return [WidgetManager()]

    plugins = Registry([Counted()], autoload=False)
    found: list[list[str]] = []
    threads = [
        threading.Thread(target=lambda: found.append([m.name for m in plugins.managers()]))
        for _ in range(16)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert loads == [1]
    assert found == [["widget"]] * 16


def test_one_rule_for_numeric_tokens() -> None:
    assert is_index("0") and is_index("12")
    assert not any(is_index(t) for t in ("\u00b2", "\u0661", "", "-1", "1.0", " 1", "GPU-1"))
