"""Plugin discovery: a :class:`Registry` holds one set of plugins, and which families they provide.

Where plugins come from (:mod:`.loading`): the built-ins in
:data:`~accelkit.registry._loading.BUILTIN_PLUGINS`, or the plugins a caller hands over, plus,
with autoload, the third-party entry points of group ``accelkit``. Discovery runs on first use
(never at ``import accelkit`` or when a Registry is built), once per registry, under a lock. Each
plugin loads on its own: a plugin that fails to import, does not match the hookspecs (wrong
arguments, an unknown ``accelkit_*`` hook), raises from a hook, or returns something that is not
a valid :class:`~accelkit.AcceleratorManager` is reported in :meth:`Registry.report` with its
distribution and version, warned about (:class:`PluginWarning`) and skipped; the others still
load. Only what the user explicitly required fails loudly (JAX's policy). Family claims and
replacements: :mod:`.claims`. Hook calls: :mod:`.calls`.

The operator's variables apply to every registry, read when it loads (from ``env``, default
``os.environ``):

- ``ACCELKIT_DISABLE_PLUGINS=a,b`` blocks plugins by name, built-ins included (status
  ``"disabled"``); a blocked built-in leaves its families free for a third party.
- ``ACCELKIT_DISABLE_PLUGIN_AUTOLOAD=1`` loads no third-party entry point except the required
  ones; ``Registry(autoload=False)`` does the same whatever the variable says.
- ``ACCELKIT_REQUIRE_PLUGINS=a,b``: when one of these is missing or not ``"ok"``,
  :meth:`~Registry.managers`, :meth:`~Registry.get_manager` and the hook calls raise
  :class:`~accelkit.PluginError` (:meth:`~Registry.report` still answers). A required plugin is
  loaded from its entry point even with autoload off.
- ``ACCELKIT_TRACE_PLUGINS=1`` prints every hook call and its result to stderr.

The module-level :func:`managers`, :func:`get_manager` and :func:`plugin_report` use the default
registry, built on first use from the built-ins and the installed entry points; every later stage
(``detect_node``, ``Allocator``, ``Grant.env``, ``visible_ids``) takes ``registry=None`` for it
and :func:`resolve` is the only place that reaches for it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import reprlib
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Optional

import pluggy

from accelkit import hookspecs
from accelkit.diagnostics import note
from accelkit.errors import PluginError, UnknownFamily
from accelkit.hookspecs import ENTRY_POINT_GROUP
from accelkit.manager import AcceleratorManager
from accelkit.registry._calls import call_each, trace_to_stderr
from accelkit.registry._claims import (
    Owners,
    assign_families,
    name_taken,
    replaces_builtin,
    required_error,
)
from accelkit.registry._contract import (
    contract_errors,
    family_policy,
    variables_read,
    version_1_note,
)
from accelkit.registry._loading import (
    BUILTIN_PLUGINS,
    EntryPoints,
    PluginManager,
    builtin_plugins,
    given_plugins,
    installed_entry_points,
    load,
    third_party,
)
from accelkit.registry._records import (
    AUTOLOAD_OFF_VAR,
    DISABLE_VAR,
    REQUIRE_VAR,
    TRACE_VAR,
    LoadedPlugin,
    PluginInfo,
    PluginWarning,
    Settings,
    Status,
    autoload_enabled,
    warn,
)

if TYPE_CHECKING:
    from accelkit.node._record import Node
    from accelkit.schedule._grant import Grant

__all__ = [
    "AUTOLOAD_OFF_VAR",
    "BUILTIN_PLUGINS",
    "DISABLE_VAR",
    "ENTRY_POINT_GROUP",
    "REQUIRE_VAR",
    "TRACE_VAR",
    "PluginInfo",
    "PluginWarning",
    "Registry",
    "Status",
    "UnknownFamily",
    "autoload_enabled",
    "contract_errors",
    "default_registry",
    "family_policy",
    "get_manager",
    "managers",
    "plugin_report",
    "reset",
    "resolve",
    "set_default",
    "variables_read",
    "version_1_note",
]


class Registry:
    """One set of plugins and the managers they provide, loaded on first use.

    ``plugins``: plugin modules or objects carrying ``@accelkit.hookimpl`` functions; None for
    the seven built-ins (and the built-in ``hints`` plugin). ``autoload`` adds the installed
    third-party entry points. ``env`` is where the operator's variables are read (default
    ``os.environ`` when the registry loads); ``entry_points`` replaces the installed entry
    points (a callable returning them), for embedders and hermetic tests.

    A scheduler that wants exactly its own plugins builds
    ``Registry([my_plugin], autoload=False)`` and passes it to every stage.
    """

    def __init__(
        self,
        plugins: Optional[Iterable[object]] = None,
        *,
        autoload: bool = True,
        env: Optional[Mapping[str, str]] = None,
        entry_points: Optional[EntryPoints] = None,
    ) -> None:
        self._given = None if plugins is None else list(plugins)
        self._autoload = autoload
        self._env = env
        self._entry_points = entry_points or installed_entry_points
        self._lock = threading.RLock()
        self._loading = False
        self._state: Optional[_Loaded] = None
        self._problems: dict[str, tuple[str, ...]] = {}
        self._hook_problems: dict[tuple[int, str], str] = {}  # (id(plugin), hook) -> fault
        self._problems_lock = threading.Lock()

    # -- the managers ----------------------------------------------------------------------
    def managers(self) -> list[AcceleratorManager]:
        """Every manager, one per family: plugins in load order (built-ins first)."""
        state = self._loaded()
        state.check_required()
        return [manager for _, manager in state.families.values()]

    def get_manager(self, family: str) -> AcceleratorManager:
        """The manager of ``family``.

        Raises :class:`UnknownFamily` (a ``KeyError``) listing the known families, and, when a
        plugin that provides or may provide the family is not in use, why not.
        """
        state = self._loaded()
        state.check_required()
        found = state.families.get(family)
        if found is not None:
            return found[1]
        known = ", ".join(state.families) or "none"
        message = f"no accelerator family {family!r}; known: {known}"
        unused = [p.info for p in state.plugins if p.info.status != "ok"]
        exact = [i for i in unused if family in i.families or i.name == family]
        for info in exact or [i for i in unused if i.status == "error" and not i.families]:
            message += f". {info.not_in_use()}"
        raise UnknownFamily(message)

    def report(self) -> list[PluginInfo]:
        """Every plugin discovery considered, in load order; never raises for a required one.

        Each carries the ``problems`` of its families' latest detection (:meth:`record_problems`)
        and of its other hooks' latest calls (one that raised or answered nonsense).
        """
        plugins = self._loaded().plugins
        with self._problems_lock:
            problems, hooks = dict(self._problems), dict(self._hook_problems)
        infos = []
        for plugin in plugins:
            found = [p for family in plugin.info.families for p in problems.get(family, ())]
            found += [said for (key, _), said in hooks.items() if key == id(plugin)]
            infos.append(dataclasses.replace(plugin.info, problems=tuple(found)))
        return infos

    def record_problems(self, problems: Mapping[str, Sequence[str]]) -> None:
        """Keep each family's errors from its latest detection, for :meth:`report`: node
        detection calls this, so an operator sees a hung or crashing vendor stack per plugin."""
        with self._problems_lock:
            self._problems.update({family: tuple(found) for family, found in problems.items()})

    # -- the other hooks -------------------------------------------------------------------
    def node_labels(self, node: Node) -> dict[str, str]:
        """Labels the plugins' ``accelkit_node_labels`` add to ``node``.

        Merged in pluggy's call order; a key that the node or an earlier plugin already has
        keeps that value. Returns only the additions.
        """
        added: dict[str, str] = {}
        for plugin, result in self._call_each("accelkit_node_labels", node=node):
            if not _is_mapping_of(result, (str,)):
                self._fault(
                    plugin,
                    "accelkit_node_labels",
                    f"{plugin.info.describe()}: accelkit_node_labels must return str: str "
                    f"pairs, got {reprlib.repr(result)}; ignored",
                )
                continue
            for key, value in result.items():
                if key not in node.labels and key not in added:
                    added[key] = value
        return added

    def worker_env(
        self, grant: Grant, env: Mapping[str, Optional[str]]
    ) -> dict[str, Optional[str]]:
        """Variables the plugins' ``accelkit_worker_env`` add to a worker's ``env``.

        Merged in pluggy's call order; a variable ``env`` already sets (the families'
        visibility) or an earlier plugin set is kept, with a warning when a plugin tried to
        change it. Returns only the additions (None: unset). The hooks get the granted
        families' managers from this registry.
        """
        added: dict[str, Optional[str]] = {}
        managers = {}
        for family in grant.ids_by_family():
            with contextlib.suppress(KeyError):  # Grant.env already refused a missing plugin
                managers[family] = self.get_manager(family)
        calls = self._call_each("accelkit_worker_env", grant=grant, env=env, managers=managers)
        for plugin, result in calls:
            if not _is_mapping_of(result, (str, type(None))):
                self._fault(
                    plugin,
                    "accelkit_worker_env",
                    f"{plugin.info.describe()}: accelkit_worker_env must return str: "
                    f"str-or-None pairs, got {reprlib.repr(result)}; ignored",
                )
                continue
            for key, value in result.items():
                if key in env and env[key] != value:
                    warn(
                        f"{plugin.info.describe()}: accelkit_worker_env may only add "
                        f"variables, not change {key}={env[key]!r} to {value!r}; kept "
                        f"{env[key]!r}"
                    )
                elif key not in env and key not in added:
                    added[key] = value
        return added

    def _call_each(self, hook: str, **kwargs: Any) -> Iterable[tuple[LoadedPlugin, Any]]:
        """Each plugin in use that implements ``hook``, alone; a raising one is a fault."""
        state = self._loaded()
        state.check_required()
        by_object = {id(p.obj): p for p in state.plugins if p.info.status == "ok"}
        for obj, result, error in call_each(
            state.pm, hook, kwargs, lambda plugin: id(plugin) in by_object
        ):
            plugin = by_object[id(obj)]
            if error is not None:
                self._fault(
                    plugin,
                    hook,
                    f"{plugin.info.describe()}: {hook} raised {type(error).__name__}: "
                    f"{error}; ignored",
                )
                continue
            with self._problems_lock:  # it answered (None too: nothing to add); a fault is past
                self._hook_problems.pop((id(plugin), hook), None)
            if result is not None:
                yield plugin, result

    def _fault(self, plugin: LoadedPlugin, hook: str, message: str) -> None:
        """A plugin's ``hook`` raised or answered nonsense: a :class:`PluginWarning`; during a
        detection (``accelkit_node_labels``) an error of the node too (:func:`accelkit.note`),
        so a node read as data (``accelkit ls --json``, a scheduler's ``node.diagnostics``)
        says what was dropped; and a problem of the plugin in :meth:`report` (``accelkit
        plugins``) until the hook next answers."""
        warn(message)
        note(message, "error")
        with self._problems_lock:
            self._hook_problems[(id(plugin), hook)] = message

    # -- loading ---------------------------------------------------------------------------
    def _loaded(self) -> _Loaded:
        with self._lock:
            if self._state is None:
                if self._loading:
                    raise PluginError("a plugin used accelkit discovery while it was being loaded")
                self._loading = True
                try:
                    env = os.environ if self._env is None else self._env
                    self._state = self._load(Settings.from_env(env, self._autoload))
                finally:
                    self._loading = False
            return self._state

    def _load(self, settings: Settings) -> _Loaded:
        pm = PluginManager(hookspecs.PROJECT)
        pm.add_hookspecs(hookspecs)
        plugins = builtin_plugins() if self._given is None else given_plugins(self._given)
        if settings.trace:
            trace_to_stderr(pm, lambda obj: pm.get_name(obj) or "?")
        plugins += third_party(settings, (p.info.name for p in plugins), self._entry_points)
        taken: dict[str, LoadedPlugin] = {}
        for plugin in plugins:
            info = plugin.info
            owner = taken.get(info.name)
            if info.name in settings.disabled:
                plugin.fail("disabled", f"blocked by {DISABLE_VAR}")
            elif owner is None:
                taken[info.name] = plugin
                load(pm, plugin)
            elif owner.info.origin == "builtin" and info.origin != "builtin":
                # a vendor's own plugin may take its family's name, if it replaces that built-in
                load(pm, plugin)
                if plugin.info.status == "ok" and not replaces_builtin(plugin, owner):
                    plugin.fail("error", name_taken(owner, replace_hint=True))
            else:
                plugin.fail("error", name_taken(owner))
        families = assign_families(plugins)
        for plugin in plugins:
            if plugin.info.status != "ok" and plugin.obj is not None:
                pm.unregister(plugin.obj)  # its other hooks must not be called either
                plugin.obj = None
            if plugin.info.status == "error" and plugin.info.name not in settings.required:
                warn(f"{plugin.info.describe()} was skipped: {plugin.info.error}")
        return _Loaded(pm, plugins, families, required_error(settings, plugins))

    def __repr__(self) -> str:
        given = "built-ins" if self._given is None else f"{len(self._given)} plugin(s)"
        state = "loaded" if self._state is not None else "not loaded"
        return f"<Registry {given}, autoload={self._autoload}, {state}>"


class _Loaded:
    """A registry after discovery: pluggy's manager, every plugin considered, the families."""

    __slots__ = ("families", "plugins", "pm", "required_problem")

    def __init__(
        self,
        pm: pluggy.PluginManager,
        plugins: list[LoadedPlugin],
        families: Owners,
        required_problem: Optional[str],
    ) -> None:
        self.pm = pm
        self.plugins = plugins
        self.families = families
        self.required_problem = required_problem

    def check_required(self) -> None:
        if self.required_problem:
            raise PluginError(self.required_problem)


def _is_mapping_of(value: object, types: tuple[type, ...]) -> bool:
    return isinstance(value, Mapping) and all(
        isinstance(k, str) and isinstance(v, types) for k, v in value.items()
    )


# -- the default registry ----------------------------------------------------------------------
_default_lock = threading.Lock()
_default: Optional[Registry] = None


def default_registry() -> Registry:
    """The process's default registry: built-ins plus installed entry points, built on first use."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Registry()
        return _default


def set_default(registry: Optional[Registry]) -> Optional[Registry]:
    """Make ``registry`` the process default (None: build a fresh one on next use).

    For applications that choose their plugins once for every library in the process, and for
    tests. Returns the previous default (None if none was built yet).
    """
    global _default
    with _default_lock:
        previous, _default = _default, registry
        return previous


def reset() -> None:
    """Forget the default registry, so the next use reads the environment and loads again."""
    set_default(None)


def resolve(registry: Optional[Registry]) -> Registry:
    """``registry``, or the default one: how every later stage reads its ``registry=None``."""
    return default_registry() if registry is None else registry


def managers() -> list[AcceleratorManager]:
    """The default registry's managers, one per family (:meth:`Registry.managers`)."""
    return default_registry().managers()


def get_manager(family: str) -> AcceleratorManager:
    """The default registry's manager of ``family`` (:meth:`Registry.get_manager`)."""
    return default_registry().get_manager(family)


def plugin_report() -> list[PluginInfo]:
    """The default registry's report of every plugin (:meth:`Registry.report`)."""
    return default_registry().report()
