"""Family claims: which plugin provides each family, and the errors when two want one.

Plugins claim families in order (built-ins in tuple order, then third parties sorted by
entry-point name); the first claim keeps a family and a later claim makes the later plugin an
``"error"`` whose message names both plugins and their distributions. The one exception: a
third-party manager declaring ``replaces = "<family>"`` (equal to its own name) takes over a
built-in's family; the built-in's status becomes ``"replaced"`` and the replacement takes its
place in the order.

Plugin names are unique, with one exception for the same reason: a vendor's replacement may use
the built-in's name as its entry-point name (NVIDIA's own plugin registered as ``nvidia``); the
report then lists both, the built-in as ``"replaced"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from accelkit.manager import AcceleratorManager
from accelkit.registry._records import DISABLE_VAR, REQUIRE_VAR, LoadedPlugin, Settings

__all__ = ["Owners", "assign_families", "name_taken", "replaces_builtin", "required_error"]

Owners = dict[str, tuple[LoadedPlugin, AcceleratorManager]]
"""family -> (the plugin that provides it, its manager), in claim order."""


def replaces_builtin(plugin: LoadedPlugin, builtin: LoadedPlugin) -> bool:
    """Whether ``plugin`` declares ``replaces`` for a family that ``builtin`` provides."""
    return any(
        m.replaces is not None and m.replaces in builtin.info.families for m in plugin.managers
    )


def name_taken(owner: LoadedPlugin, replace_hint: bool = False) -> str:
    """Why a plugin whose name ``owner`` already has is not in use."""
    text = f"its name is already taken by {owner.info.describe()}; plugin names must be unique"
    if replace_hint:
        families = ", ".join(repr(f) for f in owner.info.families) or "its family"
        return (
            f"{text} unless the plugin replaces that built-in (a manager declaring replaces = "
            f"{families}); rename the entry point or declare replaces"
        )
    return f"{text} (rename the entry point)"


def assign_families(plugins: Sequence[LoadedPlugin]) -> Owners:
    """Give each family to its first claimant, or to a third party that replaces a built-in."""
    owners: Owners = {}
    for plugin in plugins:
        if plugin.info.status != "ok":
            continue
        clash = _first_clash(plugin, owners)
        if clash is not None:
            manager, owner = clash
            plugin.fail("error", _clash_message(manager, owner, plugin))
            continue
        for manager in plugin.managers:
            if manager.name in owners:
                _replace(owners, owners[manager.name][0], plugin)
            owners[manager.name] = (plugin, manager)
    return owners


def _first_clash(
    plugin: LoadedPlugin, owners: Owners
) -> Optional[tuple[AcceleratorManager, LoadedPlugin]]:
    """The first of ``plugin``'s managers whose family is taken and may not be replaced."""
    for manager in plugin.managers:
        if manager.name in owners and not _may_replace(manager, owners[manager.name][0]):
            return manager, owners[manager.name][0]
    return None


def _may_replace(manager: AcceleratorManager, owner: LoadedPlugin) -> bool:
    return manager.replaces == manager.name and owner.info.origin == "builtin"


def _replace(owners: Owners, old: LoadedPlugin, new: LoadedPlugin) -> None:
    """Retire built-in ``old`` in favour of ``new``; ``old``'s other families go with it."""
    for family in [f for f, (p, _) in owners.items() if p is old and f not in new.info.families]:
        del owners[family]
    old.fail("replaced", f"replaced by {new.info.describe()}")


def _clash_message(manager: AcceleratorManager, owner: LoadedPlugin, plugin: LoadedPlugin) -> str:
    text = (
        f"family {manager.name!r} is claimed by {owner.info.describe()} and by "
        f"{plugin.info.describe()}; the first keeps it. Uninstall one or block one with "
        f"{DISABLE_VAR}={plugin.info.name}"
    )
    if owner.info.name != plugin.info.name:  # one name would block both
        text += f" (or {DISABLE_VAR}={owner.info.name}, to use the second)"
    if owner.info.origin == "builtin":
        text += f"; its author may declare replaces = {manager.name!r} to take over the built-in"
    return text


def required_error(settings: Settings, plugins: Sequence[LoadedPlugin]) -> Optional[str]:
    """Why a plugin named in ``ACCELKIT_REQUIRE_PLUGINS`` is not in use, or None."""
    by_name = {p.info.name: p.info for p in plugins}
    problems = []
    for name in settings.required:
        info = by_name.get(name)
        if info is None:
            found = ", ".join(by_name)
            problems.append(
                f"{name!r} is not installed: no entry point named {name!r} in group "
                f"'accelkit'; plugins found: {found}"
            )
        elif info.status != "ok":
            problems.append(info.not_in_use())
    if not problems:
        return None
    return f"{REQUIRE_VAR} names plugins that are not in use: " + "; ".join(problems)
