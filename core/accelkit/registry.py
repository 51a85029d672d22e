"""Plugin discovery: which plugins provide which accelerator families, and why some do not.

Where plugins come from:

- The built-ins are the modules in :data:`BUILTIN_PLUGINS`, registered directly so they work
  with autoload off, from a source tree and in frozen apps. The package also declares them in the
  entry-point group ``accelkit``; an entry point whose value is a built-in module *is* that
  built-in and is skipped. A built-in's plugin name is the last part of its module name.
- Third-party plugins come only from the entry-point group ``accelkit``; the plugin name is the
  entry-point name, and the value (a module, or ``module:object``) is registered with pluggy.

Discovery runs on first use (never at ``import accelkit``), once per process until
:func:`reset`, under a lock. Each plugin is loaded on its own: a plugin that fails to import,
does not match the hookspecs (wrong arguments, an unknown ``accelkit_*`` hook), raises from a
hook, or returns something that is not a valid :class:`~accelkit.AcceleratorManager` is
reported in :func:`plugin_report` with its distribution and version, warned about
(:class:`PluginWarning`) and skipped; the others still load. Only what the user explicitly
required fails loudly (JAX's policy).

Environment variables, read each time discovery runs:

- ``ACCELKIT_DISABLE_PLUGINS=a,b`` blocks plugins by name, built-ins included (status
  ``"disabled"``); a blocked built-in leaves its families free for a third party.
- ``ACCELKIT_DISABLE_PLUGIN_AUTOLOAD=1`` loads no third-party entry point except the required
  ones (built-ins still load). ``0``, ``false``, ``no``, ``off`` and empty mean unset.
- ``ACCELKIT_REQUIRE_PLUGINS=a,b``: when one of these is missing or not ``"ok"``,
  :func:`managers`, :func:`get_manager` and the hook facades raise :class:`~accelkit.PluginError`
  (:func:`plugin_report` still answers, so the failure can be inspected).
- ``ACCELKIT_TRACE_PLUGINS=1`` prints every hook call and its result to stderr.

Families: each manager's ``name`` is its family, and a family has one manager. Plugins claim
families in order (built-ins in tuple order, then third parties sorted by entry-point name); the
first claim keeps a family and a later claim makes the later plugin an ``"error"`` whose message
names both plugins and their distributions. The one exception: a third-party manager declaring
``replaces = "<family>"`` (equal to its own name) takes over a built-in's family; the built-in's
status becomes ``"replaced"`` and the replacement takes its place in the order.

Plugin names are unique, with one exception for the same reason: a vendor's replacement may use
the built-in's name as its entry-point name (NVIDIA's own plugin registered as ``nvidia``);
:func:`plugin_report` then lists both, the built-in as ``"replaced"``. A third party named like
a built-in that it does not replace is an ``"error"``. ``ACCELKIT_DISABLE_PLUGINS`` blocks by
name, so it blocks both.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import os
import reprlib
import sys
import threading
import warnings
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional

import pluggy

from . import __version__, hookspecs
from .errors import PluginError
from .manager import AcceleratorManager

if TYPE_CHECKING:
    from .grant import Grant
    from .node import Node

__all__ = [
    "BUILTIN_PLUGINS",
    "ENTRY_POINT_GROUP",
    "STATUSES",
    "PluginInfo",
    "PluginWarning",
    "UnknownFamily",
    "autoload_enabled",
    "call_node_labels",
    "call_worker_env",
    "get_manager",
    "managers",
    "plugin_report",
    "reset",
]

BUILTIN_PLUGINS = (
    "accelkit_plugins.nvidia",
    "accelkit_plugins.amd",
    "accelkit_plugins.intel",
    "accelkit_plugins.neuron",
    "accelkit_plugins.tpu",
    "accelkit_plugins.gaudi",
    "accelkit_plugins.ascend",
    "accelkit.hints",
)
"""Modules registered without entry points, in this order; each plugin's name is the last part."""

ENTRY_POINT_GROUP = "accelkit"

STATUSES = ("ok", "error", "disabled", "replaced")
"""``ok``: in use. ``error``: failed and skipped (see ``error``). ``disabled``: blocked by
``ACCELKIT_DISABLE_PLUGINS``. ``replaced``: a built-in whose family a vendor plugin took over."""

DISABLE_VAR = "ACCELKIT_DISABLE_PLUGINS"
AUTOLOAD_OFF_VAR = "ACCELKIT_DISABLE_PLUGIN_AUTOLOAD"
REQUIRE_VAR = "ACCELKIT_REQUIRE_PLUGINS"
TRACE_VAR = "ACCELKIT_TRACE_PLUGINS"
_FALSE = ("", "0", "false", "no", "off")


class PluginWarning(RuntimeWarning):
    """A plugin failed to load or a hook call failed; the plugin was skipped."""


class UnknownFamily(KeyError):
    """``get_manager`` has no manager for the family; the message says which exist and why not."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True)
class PluginInfo:
    """One plugin as discovery saw it: where it came from and whether it is in use.

    ``families`` are the families the plugin provides, or, when it is not in use, the ones it
    tried to provide (empty if it failed before saying). ``error`` explains any status but
    ``"ok"``.
    """

    name: str
    module: str
    origin: str
    dist: Optional[str]
    version: Optional[str]
    status: str
    error: Optional[str] = None
    families: tuple[str, ...] = ()

    def describe(self) -> str:
        """``plugin 'acme' (accelkit-example 0.1.0)``: how messages name a plugin."""
        built = ", built-in" if self.origin == "builtin" else ""
        return f"plugin {self.name!r} ({self.dist or '?'} {self.version or '?'}{built})"

    def not_in_use(self) -> str:
        """Why the plugin is not in use, naming it: for messages."""
        return f"{self.describe()} is not in use ({self.status}): {self.error}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``accelkit plugins --json``)."""
        data = asdict(self)
        data["families"] = list(self.families)
        return data


@dataclass(frozen=True)
class _Settings:
    disabled: frozenset[str]
    required: tuple[str, ...]
    autoload: bool
    trace: bool

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> _Settings:
        def names(var: str) -> tuple[str, ...]:
            return tuple(n.strip() for n in env.get(var, "").split(",") if n.strip())

        return cls(
            disabled=frozenset(names(DISABLE_VAR)),
            required=names(REQUIRE_VAR),
            autoload=autoload_enabled(env),
            trace=env.get(TRACE_VAR, "").strip().lower() not in _FALSE,
        )


@dataclass
class _Plugin:
    """A plugin while it is loaded: its record, its hook implementations and its managers."""

    info: PluginInfo
    load: Callable[[], object]
    impls: dict[str, pluggy.HookImpl] = field(default_factory=dict)
    managers: list[AcceleratorManager] = field(default_factory=list)

    def fail(self, status: str, error: str) -> None:
        self.info = dataclasses.replace(self.info, status=status, error=error)


@dataclass
class _Discovery:
    plugins: list[_Plugin]
    families: dict[str, tuple[_Plugin, AcceleratorManager]]
    required_error: Optional[str]
    trace: bool

    def check_required(self) -> None:
        if self.required_error:
            raise PluginError(self.required_error)


_lock = threading.RLock()
_state: Optional[_Discovery] = None
_loading = False


# -- public API ------------------------------------------------------------------------------
def managers() -> list[AcceleratorManager]:
    """Every discovered manager, one per family: built-ins in tuple order, then third parties."""
    state = _discovered()
    state.check_required()
    return [manager for _, manager in state.families.values()]


def get_manager(name: str) -> AcceleratorManager:
    """The manager of family ``name``.

    Raises :class:`UnknownFamily` (a ``KeyError``) listing the known families, and, when a
    plugin that provides or may provide the family is not in use, why not.
    """
    state = _discovered()
    state.check_required()
    found = state.families.get(name)
    if found is not None:
        return found[1]
    message = f"no accelerator family {name!r}; known: {', '.join(state.families) or 'none'}"
    unused = [p.info for p in state.plugins if p.info.status != "ok"]
    exact = [i for i in unused if name in i.families or i.name == name]
    for info in exact or [i for i in unused if i.status == "error" and not i.families]:
        message += f". {info.not_in_use()}"
    raise UnknownFamily(message)


def plugin_report() -> list[PluginInfo]:
    """Every plugin discovery considered, in load order; never raises for a required plugin."""
    return [plugin.info for plugin in _discovered().plugins]


def autoload_enabled(env: Optional[Mapping[str, str]] = None) -> bool:
    """Whether third-party entry points load (``ACCELKIT_DISABLE_PLUGIN_AUTOLOAD`` unset)."""
    value = (os.environ if env is None else env).get(AUTOLOAD_OFF_VAR, "")
    return value.strip().lower() in _FALSE


def reset() -> None:
    """Forget the discovery, so the next use reads the environment and loads plugins again."""
    global _state
    with _lock:
        _state = None


def call_node_labels(node: Node) -> dict[str, str]:
    """Labels the plugins' ``accelkit_node_labels`` add to ``node``.

    Merged in plugin order; a key that the node or an earlier plugin already has keeps that
    value. Returns only the additions: ``node.labels.update(call_node_labels(node))``.
    """
    added: dict[str, str] = {}
    for plugin, result in _call_each("accelkit_node_labels", node=node):
        if not _is_mapping_of(result, (str,)):
            _warn(
                f"{plugin.info.describe()}: accelkit_node_labels must return str: str pairs, "
                f"got {reprlib.repr(result)}; ignored"
            )
            continue
        for key, value in result.items():
            if key not in node.labels and key not in added:
                added[key] = value
    return added


def call_worker_env(grant: Grant, env: Mapping[str, Optional[str]]) -> dict[str, Optional[str]]:
    """Variables the plugins' ``accelkit_worker_env`` add to a worker's ``env`` for ``grant``.

    Merged in plugin order; a variable ``env`` already sets (the families' visibility) or an
    earlier plugin set is kept, with a warning when a plugin tried to change it. Returns only
    the additions (None: unset): ``env.update(call_worker_env(grant, env))``.
    """
    added: dict[str, Optional[str]] = {}
    for plugin, result in _call_each("accelkit_worker_env", grant=grant, env=env):
        if not _is_mapping_of(result, (str, type(None))):
            _warn(
                f"{plugin.info.describe()}: accelkit_worker_env must return str: str-or-None "
                f"pairs, got {reprlib.repr(result)}; ignored"
            )
            continue
        for key, value in result.items():
            if key in env and env[key] != value:
                _warn(
                    f"{plugin.info.describe()}: accelkit_worker_env may only add variables, "
                    f"not change {key}={env[key]!r} to {value!r}; kept {env[key]!r}"
                )
            elif key not in env and key not in added:
                added[key] = value
    return added


# -- hook calls --------------------------------------------------------------------------------
def _call_each(hook: str, **kwargs: Any) -> Iterator[tuple[_Plugin, Any]]:
    """Call ``hook`` on each plugin in use, alone; a raising plugin is warned about, not fatal.

    Plugin order, except that ``@hookimpl(tryfirst=True)`` implementations come first and
    ``trylast`` ones last.
    """
    state = _discovered()
    state.check_required()
    callers = [p for p in state.plugins if p.info.status == "ok" and hook in p.impls]
    callers.sort(key=lambda p: 0 if p.impls[hook].tryfirst else 2 if p.impls[hook].trylast else 1)
    for plugin in callers:
        try:
            result = _call(plugin, hook, kwargs, state.trace)
        except Exception as exc:
            _warn(f"{plugin.info.describe()}: {hook} raised {type(exc).__name__}: {exc}; ignored")
            continue
        if result is not None:
            yield plugin, result


def _call(plugin: _Plugin, hook: str, kwargs: Mapping[str, Any], trace: bool) -> Any:
    impl = plugin.impls[hook]
    if trace:
        shown = ", ".join(f"{a}={reprlib.repr(kwargs[a])}" for a in impl.argnames)
        print(f"accelkit trace: {plugin.info.name}.{hook}({shown})", file=sys.stderr)
    try:
        result = impl.function(*(kwargs[a] for a in impl.argnames))
    except Exception as exc:
        if trace:
            print(f"accelkit trace:   raised {type(exc).__name__}: {exc}", file=sys.stderr)
        raise
    if trace:
        print(f"accelkit trace:   -> {reprlib.repr(result)}", file=sys.stderr)
    return result


def _is_mapping_of(value: object, types: tuple[type, ...]) -> bool:
    return isinstance(value, Mapping) and all(
        isinstance(k, str) and isinstance(v, types) for k, v in value.items()
    )


def _warn(message: str) -> None:
    """Warn with the location of the first caller outside this module."""
    frame, level = sys._getframe(1), 2
    while frame.f_back is not None and frame.f_globals.get("__name__") == __name__:
        frame, level = frame.f_back, level + 1
    warnings.warn(message, PluginWarning, stacklevel=level)


# -- discovery ---------------------------------------------------------------------------------
def _discovered() -> _Discovery:
    global _state, _loading
    with _lock:
        if _state is None:
            if _loading:
                raise PluginError("a plugin used accelkit discovery while it was being loaded")
            _loading = True
            try:
                _state = _discover(_Settings.from_env(os.environ))
            finally:
                _loading = False
        return _state


def _discover(settings: _Settings) -> _Discovery:
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    plugins = _candidates(settings)
    taken: dict[str, _Plugin] = {}
    for plugin in plugins:
        info = plugin.info
        owner = taken.get(info.name)
        if info.name in settings.disabled:
            plugin.fail("disabled", f"blocked by {DISABLE_VAR}")
        elif owner is None:
            taken[info.name] = plugin
            _load(pm, plugin, settings.trace)
        elif owner.info.origin == "builtin" and info.origin != "builtin":
            # a vendor's own plugin may take its family's name, if it replaces that built-in
            _load(pm, plugin, settings.trace)
            if plugin.info.status == "ok" and not _replaces_builtin(plugin, owner):
                plugin.fail("error", _name_taken(owner, replace_hint=True))
        else:
            plugin.fail("error", _name_taken(owner))
    families = _assign_families(plugins)
    for plugin in plugins:
        if plugin.info.status == "error" and plugin.info.name not in settings.required:
            _warn(f"{plugin.info.describe()} was skipped: {plugin.info.error}")
    return _Discovery(plugins, families, _required_error(settings, plugins), settings.trace)


def _replaces_builtin(plugin: _Plugin, builtin: _Plugin) -> bool:
    """Whether ``plugin`` declares ``replaces`` for a family that ``builtin`` provides."""
    return any(m.replaces is not None and m.replaces in builtin.info.families
               for m in plugin.managers)  # fmt: skip


def _name_taken(owner: _Plugin, replace_hint: bool = False) -> str:
    text = f"its name is already taken by {owner.info.describe()}; plugin names must be unique"
    if replace_hint:
        families = ", ".join(repr(f) for f in owner.info.families) or "its family"
        return (
            f"{text} unless the plugin replaces that built-in (a manager declaring replaces = "
            f"{families}); rename the entry point or declare replaces"
        )
    return f"{text} (rename the entry point)"


def _candidates(settings: _Settings) -> list[_Plugin]:
    """Built-ins in tuple order, then the wanted third-party entry points sorted by name."""
    plugins = [
        _Plugin(
            PluginInfo(module.rpartition(".")[2], module, "builtin", "accelkit", __version__, "ok"),
            load=functools.partial(importlib.import_module, module),
        )
        for module in BUILTIN_PLUGINS
    ]
    wanted = set(settings.required) - {p.info.name for p in plugins}
    if not settings.autoload and not wanted:
        return plugins
    try:
        points = [ep for ep in _entry_points() if _module_of(ep) not in BUILTIN_PLUGINS]
    except Exception as exc:  # broken metadata of any installed package must not stop built-ins
        _warn(
            f"listing entry points of group {ENTRY_POINT_GROUP!r} failed: {exc!r}; only "
            "built-in plugins were loaded"
        )
        return plugins
    seen: set[tuple[str, str]] = set()
    for ep in sorted(points, key=lambda ep: (ep.name, _dist_of(ep)[0] or "", ep.value)):
        if (ep.name, ep.value) in seen or not (settings.autoload or ep.name in wanted):
            continue
        seen.add((ep.name, ep.value))
        dist, version = _dist_of(ep)
        info = PluginInfo(ep.name, ep.value, "entry-point", dist, version, "ok")
        plugins.append(_Plugin(info, load=ep.load))
    return plugins


def _entry_points() -> list[Any]:
    """The entry points of group ``accelkit`` (tests replace this to install fake plugins)."""
    from .metadata import metadata

    return list(metadata.entry_points(group=ENTRY_POINT_GROUP))


def _module_of(ep: Any) -> str:
    """The module an entry point names (``module`` or ``module:object``), even when malformed."""
    return str(ep.value).partition(":")[0].strip()


def _dist_of(ep: Any) -> tuple[Optional[str], Optional[str]]:
    dist = getattr(ep, "dist", None)
    return (dist.name, dist.version) if dist is not None else (None, None)


def _load(pm: pluggy.PluginManager, plugin: _Plugin, trace: bool) -> None:
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
        plugin.impls = _validated_impls(pm, obj)
        if "accelkit_register_managers" in plugin.impls:
            step = "accelkit_register_managers raised"
            result = _call(plugin, "accelkit_register_managers", {}, trace)
            plugin.managers = _validated_managers(plugin, result)
    except Exception as exc:
        if obj is not None and pm.is_registered(obj):
            pm.unregister(obj)
        text = " ".join(str(exc).split())
        if isinstance(exc, _Invalid):
            plugin.fail("error", text)
        elif isinstance(exc, pluggy.PluginValidationError):
            plugin.fail("error", f"does not match the accelkit hookspecs: {text}")
        else:
            plugin.fail("error", f"{step} {type(exc).__name__}: {text}")


class _Invalid(Exception):
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
                raise _Invalid(
                    f"{caller.name} is a hook wrapper; accelkit calls each plugin's "
                    "hooks on their own, so wrappers are not supported"
                )
            else:
                impls[caller.name] = impl
    known = ", ".join(sorted(n for n in dir(hookspecs) if n.startswith("accelkit_")))
    if unknown:
        raise _Invalid(f"unknown hook(s) {', '.join(sorted(unknown))}; known hooks: {known}")
    if not impls:
        raise _Invalid(f"implements no accelkit hook; mark one of {known} with @accelkit.hookimpl")
    return impls


def _validated_managers(plugin: _Plugin, result: object) -> list[AcceleratorManager]:
    """The managers a plugin returned, or :class:`_Invalid` saying what is wrong with them."""
    hint = "return a list of manager instances, e.g. [AcmeManager()]"
    if result is None or isinstance(result, (str, bytes, Mapping, AcceleratorManager)):
        raise _Invalid(f"accelkit_register_managers returned {reprlib.repr(result)}; {hint}")
    if not isinstance(result, Iterable):
        raise _Invalid(f"accelkit_register_managers returned {reprlib.repr(result)}; {hint}")
    found = list(result)
    problems: list[str] = []
    for item in found:
        if isinstance(item, type) and issubclass(item, AcceleratorManager):
            problems.append(
                f"returned the class {item.__name__}, not an instance {item.__name__}()"
            )
        elif not isinstance(item, AcceleratorManager):
            problems.append(f"returned {reprlib.repr(item)}, which is not an AcceleratorManager")
        else:
            problems.extend(item.contract_errors())
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
    plugin.info = dataclasses.replace(plugin.info, families=tuple(dict.fromkeys(names)))
    if problems:
        raise _Invalid("; ".join(problems))
    return found


def _assign_families(plugins: list[_Plugin]) -> dict[str, tuple[_Plugin, AcceleratorManager]]:
    """Give each family to its first claimant, or to a third party that replaces a built-in."""
    owners: dict[str, tuple[_Plugin, AcceleratorManager]] = {}
    for plugin in plugins:
        if plugin.info.status != "ok":
            continue
        clash = next(
            (
                (m, owners[m.name][0])
                for m in plugin.managers
                if m.name in owners and not _may_replace(m, owners[m.name][0])
            ),
            None,
        )
        if clash is not None:
            plugin.fail("error", _clash_message(clash[0], clash[1], plugin))
            continue
        for manager in plugin.managers:
            if manager.name in owners:
                _replace(owners, owners[manager.name][0], plugin)
            owners[manager.name] = (plugin, manager)
    return owners


def _may_replace(manager: AcceleratorManager, owner: _Plugin) -> bool:
    return manager.replaces == manager.name and owner.info.origin == "builtin"


def _replace(
    owners: dict[str, tuple[_Plugin, AcceleratorManager]], old: _Plugin, new: _Plugin
) -> None:
    """Retire built-in ``old`` in favour of ``new``; ``old``'s other families go with it."""
    for family in [f for f, (p, _) in owners.items() if p is old and f not in new.info.families]:
        del owners[family]
    old.fail("replaced", f"replaced by {new.info.describe()}")


def _clash_message(manager: AcceleratorManager, owner: _Plugin, plugin: _Plugin) -> str:
    text = (
        f"family {manager.name!r} is claimed by {owner.info.describe()} and by "
        f"{plugin.info.describe()}; the first keeps it. Uninstall one or block one with "
        f"{DISABLE_VAR}={plugin.info.name}"
    )
    if owner.info.origin == "builtin":
        text += f", or declare replaces = {manager.name!r} to take over the built-in family"
    return text


def _required_error(settings: _Settings, plugins: list[_Plugin]) -> Optional[str]:
    by_name = {p.info.name: p.info for p in plugins}
    problems = []
    for name in settings.required:
        info = by_name.get(name)
        if info is None:
            found = ", ".join(by_name)
            problems.append(
                f"{name!r} is not installed: no entry point named {name!r} in group "
                f"{ENTRY_POINT_GROUP!r}; plugins found: {found}"
            )
        elif info.status != "ok":
            problems.append(info.not_in_use())
    if not problems:
        return None
    return f"{REQUIRE_VAR} names plugins that are not in use: " + "; ".join(problems)
