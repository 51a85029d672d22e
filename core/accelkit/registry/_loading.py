"""Loading plugins: where they come from, and importing and validating each one on its own.

Built-ins are the modules in :data:`BUILTIN_PLUGINS`, registered directly so they work with
autoload off, from a source tree and in frozen apps; the package also declares them as entry
points, and an entry point whose value is a built-in module *is* that built-in and is skipped.
Third-party plugins come only from the entry-point group ``accelkit``. Each plugin loads alone:
one that fails to import, does not match the hookspecs or returns bad managers is marked
``"error"`` and the others still load (pluggy's ``load_setuptools_entrypoints`` would stop at
the first).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import reprlib
from collections.abc import Iterable, Mapping
from types import FunctionType, MethodType, ModuleType
from typing import Any, Callable, Optional

import pluggy

from accelkit import hookspecs
from accelkit._faults import PLUGIN_FAULTS
from accelkit._version import VERSION
from accelkit.manager import AcceleratorManager
from accelkit.registry._calls import call_one
from accelkit.registry._contract import adopt_version_1, call_errors, contract_errors
from accelkit.registry._records import LoadedPlugin, PluginInfo, Settings, warn
from accelkit.registry._sites import SiteDistribution, site_entry_points

__all__ = [
    "BUILTIN_PLUGINS",
    "EntryPoints",
    "PluginManager",
    "builtin_plugins",
    "given_plugins",
    "load",
    "third_party",
]

BUILTIN_PLUGINS = (
    "accelkit_plugins.nvidia",
    "accelkit_plugins.amd",
    "accelkit_plugins.intel",
    "accelkit_plugins.neuron",
    "accelkit_plugins.tpu",
    "accelkit_plugins.gaudi",
    "accelkit_plugins.ascend",
    "accelkit_plugins.hints",
)
"""Modules registered without entry points, in this order; each plugin's name is the last part."""

EntryPoints = Callable[[], Iterable[Any]]
"""Where third-party plugins are listed: a callable returning entry points of group accelkit."""


class PluginManager(pluggy.PluginManager):
    """pluggy's manager, ruling out a plugin module's plain names before pluggy inspects them.

    pluggy registers a plugin by looking up every name in ``dir(plugin)`` with
    ``inspect.getattr_static``. A plugin module's names are mostly its imports and constants
    (about 55 in a built-in), and ruling them out one by one cost every start-up 2 ms. In a
    module only a function carrying ``@hookimpl``'s mark (or a bound method) can be a hook, so
    every other name is skipped here; the rest, and every name of a plugin object that is not a
    module, go through pluggy's own check (``parse_hookimpl_opts`` is pluggy's documented hook
    for this).
    """

    def parse_hookimpl_opts(self, plugin: object, name: str) -> Optional[pluggy.HookimplOpts]:
        if isinstance(plugin, ModuleType):
            value = vars(plugin).get(name)
            marked = isinstance(value, FunctionType) and hasattr(value, f"{self.project_name}_impl")
            if not (marked or isinstance(value, MethodType)):
                return None
        return super().parse_hookimpl_opts(plugin, name)


def installed_entry_points() -> list[Any]:
    """The installed distributions' entry points of group ``accelkit``, read from ``sys.path``
    without ``importlib.metadata`` wherever that reading is certain to agree with it
    (``registry._sites``)."""
    points = site_entry_points(hookspecs.ENTRY_POINT_GROUP)
    if points is not None:
        return points
    from accelkit._distributions import metadata

    return list(metadata.entry_points(group=hookspecs.ENTRY_POINT_GROUP))


def builtin_plugins() -> list[LoadedPlugin]:
    """The built-ins, in tuple order, not yet imported."""
    return [
        LoadedPlugin(
            PluginInfo(module.rpartition(".")[2], module, "builtin", "accelkit", VERSION, "ok"),
            load=functools.partial(importlib.import_module, module),
        )
        for module in BUILTIN_PLUGINS
    ]


def given_plugins(plugins: Iterable[object]) -> list[LoadedPlugin]:
    """Plugins a caller handed to a Registry: modules or objects with ``@hookimpl`` functions."""
    loaded = []
    for plugin in plugins:
        module = getattr(plugin, "__name__", None)
        if not isinstance(module, str):
            module = f"{type(plugin).__module__}.{type(plugin).__qualname__}"
        origin = "builtin" if module in BUILTIN_PLUGINS else "given"
        version = VERSION if origin == "builtin" else None
        dist = "accelkit" if origin == "builtin" else None
        info = PluginInfo(module.rpartition(".")[2], module, origin, dist, version, "ok")
        loaded.append(LoadedPlugin(info, load=functools.partial(_same, plugin)))
    return loaded


def _same(plugin: object) -> object:
    return plugin


def third_party(
    settings: Settings, taken: Iterable[str], source: EntryPoints
) -> list[LoadedPlugin]:
    """The wanted third-party entry points, sorted by name; built-in modules are skipped."""
    wanted = set(settings.required) - set(taken)
    if not settings.autoload and not wanted:
        return []
    try:
        points = [ep for ep in source() if _module_of(ep) not in BUILTIN_PLUGINS]
    except Exception as exc:  # broken metadata of any installed package must not stop built-ins
        warn(
            f"listing entry points of group {hookspecs.ENTRY_POINT_GROUP!r} failed: {exc!r}; "
            "only built-in plugins were loaded"
        )
        return []
    origins = _DistOrigins()
    plugins: list[LoadedPlugin] = []
    seen: set[tuple[str, str]] = set()
    for ep in sorted(points, key=lambda ep: (ep.name, origins.of(ep)[0] or "", ep.value)):
        if (ep.name, ep.value) in seen or not (settings.autoload or ep.name in wanted):
            continue
        seen.add((ep.name, ep.value))
        dist, version = origins.of(ep)
        info = PluginInfo(ep.name, ep.value, "entry-point", dist, version, "ok")
        plugins.append(LoadedPlugin(info, load=ep.load))
    return plugins


def _module_of(ep: Any) -> str:
    """The module an entry point names (``module`` or ``module:object``), even when malformed."""
    return str(ep.value).partition(":")[0].strip()


class _DistOrigins:
    """Each entry point's distribution name and version, its metadata read once per
    distribution: ``dist.name`` and ``dist.version`` each parse the whole ``METADATA`` file."""

    def __init__(self) -> None:
        self._known: dict[int, tuple[object, Optional[str], Optional[str]]] = {}

    def of(self, ep: Any) -> tuple[Optional[str], Optional[str]]:
        dist = getattr(ep, "dist", None)
        if dist is None:
            return (None, None)
        if id(dist) not in self._known:  # the distribution is kept, so its id stays its own
            if isinstance(dist, SiteDistribution):
                name, version = dist.name_and_version()
            else:
                fields = dist.metadata
                name, version = fields.get("Name"), fields.get("Version")
            self._known[id(dist)] = (dist, name, version)
        _, name, version = self._known[id(dist)]
        return (name, version)


def load(pm: pluggy.PluginManager, plugin: LoadedPlugin) -> None:
    """Import, register and validate one plugin, then ask it for its managers; never raises."""
    obj: object = None
    step = "import failed:"
    try:
        obj = plugin.load()
        step = "registration failed:"
        name = plugin.info.name
        if pm.has_plugin(name):  # a replacement named like the built-in it replaces
            name = f"{name} ({plugin.info.dist or plugin.info.module})"
        pm.register(obj, name=name)
        plugin.obj = obj
        plugin.impls = _validated_impls(pm, obj)
        if "accelkit_register_managers" in plugin.impls:
            step = "accelkit_register_managers raised"
            result = call_one(pm, "accelkit_register_managers", obj, {})
            plugin.managers = _validated_managers(plugin, result)
    except PLUGIN_FAULTS as exc:
        if obj is not None and pm.is_registered(obj):
            pm.unregister(obj)
        plugin.obj = None
        text = " ".join(str(exc).split())
        if isinstance(exc, Invalid):
            plugin.fail("error", text)
        elif isinstance(exc, pluggy.PluginValidationError):
            plugin.fail("error", f"does not match the accelkit hookspecs: {text}")
        else:
            plugin.fail("error", f"{step} {type(exc).__name__}: {text}")


class Invalid(Exception):
    """A plugin broke a rule the loader checks (explained in the message)."""


def _validated_impls(pm: pluggy.PluginManager, obj: object) -> dict[str, pluggy.HookImpl]:
    """The plugin's implementation per hook, after pluggy's argument check (on register)."""
    impls: dict[str, pluggy.HookImpl] = {}
    unknown: list[str] = []
    for caller in pm.get_hookcallers(obj) or []:
        for impl in caller.get_hookimpls():
            if impl.plugin is not obj:
                continue
            if not caller.has_spec():
                if not impl.optionalhook:
                    unknown.append(caller.name)
            elif impl.hookwrapper or impl.wrapper:
                raise Invalid(
                    f"{caller.name} is a hook wrapper; accelkit calls each plugin's "
                    "hooks on their own, so wrappers are not supported"
                )
            else:
                impls[caller.name] = impl
    known = ", ".join(sorted(n for n in dir(hookspecs) if n.startswith("accelkit_")))
    if unknown:
        raise Invalid(f"unknown hook(s) {', '.join(sorted(unknown))}; known hooks: {known}")
    if not impls:
        raise Invalid(f"implements no accelkit hook; mark one of {known} with @accelkit.hookimpl")
    return impls


def _validated_managers(plugin: LoadedPlugin, result: object) -> list[AcceleratorManager]:
    """The managers a plugin returned, or :class:`Invalid` saying what is wrong with them."""
    hint = "return a list of manager instances, e.g. [AcmeManager()]"
    if result is None or isinstance(result, (str, bytes, Mapping, AcceleratorManager)):
        raise Invalid(f"accelkit_register_managers returned {reprlib.repr(result)}; {hint}")
    if not isinstance(result, Iterable):
        raise Invalid(f"accelkit_register_managers returned {reprlib.repr(result)}; {hint}")
    found = list(result)
    problems: list[str] = []
    notes: list[str] = []
    for item in found:
        if isinstance(item, type) and issubclass(item, AcceleratorManager):
            problems.append(
                f"returned the class {item.__name__}, not an instance {item.__name__}()"
            )
        elif not isinstance(item, AcceleratorManager):
            problems.append(f"returned {reprlib.repr(item)}, which is not an AcceleratorManager")
        else:
            deprecated = adopt_version_1(item)
            if deprecated is not None:
                notes.append(deprecated)
            problems.extend(contract_errors(item))
            problems.extend(call_errors(item))
            replaces = item.replaces
            if replaces is not None and replaces != item.name:
                problems.append(
                    f"{type(item).__name__}.replaces is {replaces!r} but its name is "
                    f"{item.name!r}; a replacement takes over the family, so name it "
                    f"{replaces!r}"
                )
    names = [m.name for m in found if isinstance(m, AcceleratorManager)]
    problems.extend(
        f"returns two managers for family {n!r}"
        for n in sorted({n for n in names if names.count(n) > 1})
    )
    plugin.info = dataclasses.replace(
        plugin.info, families=tuple(dict.fromkeys(names)), notes=tuple(notes)
    )
    for note in notes:
        warn(f"{plugin.info.describe()}: {note}")
    if problems:
        raise Invalid("; ".join(problems))
    return found
