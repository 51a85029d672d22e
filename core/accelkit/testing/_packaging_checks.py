"""Packaging: the plugin is installed where schedulers look for it, loads, and says who it is.

Schedulers find plugins only through the ``accelkit`` entry-point group of installed
distributions, so these checks read the same metadata the loader does (``importlib.metadata``,
or its ``importlib-metadata`` backport before Python 3.10).
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from typing import Any, Optional

from accelkit import hookspecs, registry
from accelkit._distributions import metadata
from accelkit.manager import AcceleratorManager
from accelkit.testing._catalog import check
from accelkit.testing._subject import Subject

GROUP = hookspecs.ENTRY_POINT_GROUP
"""The entry-point group every accelkit plugin is declared in."""

ACCELKIT_REQUIREMENT = re.compile(r"^accelkit\b(?![-_.\w])", re.IGNORECASE)


@dataclass(frozen=True)
class PluginEntry:
    """An ``accelkit`` entry point and the distribution that declares it."""

    name: str
    value: str
    distribution: str
    version: str
    requires: tuple[str, ...]
    entry_point: Any

    @property
    def module(self) -> str:
        return self.value.partition(":")[0].strip()


def plugin_entries() -> list[PluginEntry]:
    """Every entry point of the ``accelkit`` group, once per distribution, sorted by name."""
    found: dict[tuple[str, str], PluginEntry] = {}
    for dist in metadata.distributions():
        facts = dist.metadata  # None for a distribution with no metadata file (the backport)
        dist_name = (facts["Name"] if facts is not None else None) or "?"
        for entry in dist.entry_points:
            if entry.group != GROUP:
                continue
            found.setdefault(
                (dist_name.lower(), entry.name),
                PluginEntry(
                    entry.name,
                    entry.value,
                    dist_name,
                    dist.version or "",
                    tuple(dist.requires or ()),
                    entry,
                ),
            )
    return sorted(found.values(), key=lambda e: (e.name, e.distribution))


def entries_for(manager: AcceleratorManager) -> list[PluginEntry]:
    """Entry points of the plugin that provides ``manager``.

    First those whose module is the manager's module or a package containing it; failing that,
    any whose plugin registers a manager of the same class (a plugin object kept elsewhere).
    """
    module = type(manager).__module__
    entries = plugin_entries()
    near = [e for e in entries if module == e.module or module.startswith(e.module + ".")]
    return near or [e for e in entries if _registers(e, type(manager))]


def _registers(entry: PluginEntry, cls: type[AcceleratorManager]) -> bool:
    try:
        register = getattr(entry.entry_point.load(), "accelkit_register_managers", None)
        return register is not None and any(type(m) is cls for m in register())
    except Exception:  # another plugin's breakage is its own check's business
        return False


def _entry(subject: Subject) -> PluginEntry:
    module = type(subject.manager).__module__
    entries = entries_for(subject.manager)
    assert entries, (
        f"no installed distribution declares {module} in the {GROUP!r} entry-point group, so "
        f"schedulers will never find {subject.label}; add to pyproject.toml:\n"
        f'    [project.entry-points.{GROUP}]\n    {subject.family} = "{module}"\n'
        "and install the package (pip install -e .)"
    )
    return entries[0]


@check("packaging")
def entry_point(subject: Subject) -> None:
    """An 'accelkit' entry point names the plugin, and the registry schedulers use loads it, in
    use, providing this manager's family (so a family clash fails here as it does for them)."""
    entry = _entry(subject)
    where = f"entry point {entry.name} = {entry.value!r} of {entry.distribution}"
    info = _as_loaded(entry)
    assert info is not None, (
        f"accelkit's registry did not consider {where} (see accelkit plugins); is autoload off "
        f"({registry.AUTOLOAD_OFF_VAR})?"
    )
    assert info.status == "ok", f"{where}: {info.not_in_use()}"
    cls = type(subject.manager)
    provided = registry.get_manager(subject.family) if subject.family in info.families else None
    assert type(provided) is cls, (
        f"{where} provides families {list(info.families)} with "
        f"{type(provided).__name__ if provided else 'no manager'} for {subject.family!r}, not a "
        f"{cls.__name__}; return an instance from an @accelkit.hookimpl function named "
        "accelkit_register_managers"
    )


def _as_loaded(entry: PluginEntry) -> Optional[registry.PluginInfo]:
    """How the default registry, which schedulers use, loaded ``entry``: None if it did not."""
    with warnings.catch_warnings():  # the report itself says why a plugin is not in use
        warnings.simplefilter("ignore", registry.PluginWarning)
        report = registry.plugin_report()
    return next((i for i in report if i.name == entry.name and i.module == entry.value), None)


@check("packaging")
def distribution(subject: Subject) -> None:
    """The plugin's distribution has a name and a version, and depends on accelkit."""
    entry = _entry(subject)
    assert entry.version, f"distribution {entry.distribution} has no version"
    if entry.distribution.lower() == "accelkit":
        return
    assert any(ACCELKIT_REQUIREMENT.match(r) for r in entry.requires), (
        f"distribution {entry.distribution} {entry.version} does not depend on accelkit "
        f"(requires {list(entry.requires)}); add 'accelkit' to [project] dependencies"
    )
