"""The work behind ``accelkit check``: resolve the names, run the kit, report.

Kept apart from :mod:`accelkit.cli._check` so that ``accelkit --help`` and the other verbs never
import the conformance kit.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from accelkit import registry
from accelkit.cli import EXIT_FAILED, EXIT_OK, EXIT_USAGE, printable
from accelkit.cli._common import host_from_args, print_json
from accelkit.host import Host
from accelkit.manager import AcceleratorManager
from accelkit.testing._catalog import TOPICS
from accelkit.testing._runner import Outcome, run_checks
from accelkit.testing._subject import Subject
from accelkit.testing.fakes import BrokenHostBuilder, host_builder

_MARKS = {
    "passed": "ok",
    "noted": "note",
    "failed": "FAIL",
    "error": "ERROR",
    "skipped": "skip",
    "xfailed": "xfail",
    "xpassed": "XPASS",
}


@dataclass
class Target:
    """One family to check, or a plugin that failed before it could name one."""

    family: str
    plugin: Optional[registry.PluginInfo]
    manager: Optional[AcceleratorManager]
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.outcomes) and not any(o.failing for o in self.outcomes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "manager": type(self.manager).__name__ if self.manager is not None else None,
            "plugin": self.plugin.to_dict() if self.plugin is not None else None,
            "ok": self.ok,
            "outcomes": [o.to_dict() for o in self.outcomes],
        }


def run(args: argparse.Namespace) -> int:
    """Check every target, print the report, and exit 1 if any check failed."""
    try:
        targets = targets_named(args.names)
    except KeyError as exc:
        print(f"accelkit check: error: {printable(str(exc.args[0]))}", file=sys.stderr)
        return EXIT_USAGE
    replay = host_from_args(args) if args.host else None
    for target in targets:
        if target.manager is not None:
            target.outcomes = check_manager(target.manager, replay)
    if args.json:
        print_json({"ok": all(t.ok for t in targets), "results": [t.to_dict() for t in targets]})
    else:
        print("\n\n".join(render(t) for t in targets))
    return EXIT_OK if all(t.ok for t in targets) else EXIT_FAILED


def targets_named(names: Sequence[str]) -> list[Target]:
    """The targets ``names`` stand for; ``KeyError`` names what exists when one is unknown."""
    with warnings.catch_warnings():  # the report itself says which plugins failed, and why
        warnings.simplefilter("ignore", registry.PluginWarning)
        report = registry.plugin_report()
    provider = {family: info for info in report if info.status == "ok" for family in info.families}
    if not names:
        found = [Target(m.name, provider.get(m.name), m) for m in registry.managers()]
        return found + [_not_loaded(p.name, p) for p in report if p.status == "error"]
    targets: list[Target] = []
    for name in names:
        plugin = next((info for info in report if info.name == name), None)
        if name in provider:
            families = [name]
        elif plugin is not None and plugin.status == "ok":
            if not plugin.families:
                raise KeyError(f"{plugin.describe()} provides no accelerator family to check")
            families = list(plugin.families)
        elif plugin is not None:
            targets.append(_not_loaded(name, plugin))
            continue
        else:
            raise KeyError(_unknown(name, report))
        targets.extend(Target(f, provider.get(f), registry.get_manager(f)) for f in families)
    return targets


def _unknown(name: str, report: Sequence[registry.PluginInfo]) -> str:
    """get_manager's explanation (known families, plugins not in use), plus the plugin names."""
    try:
        registry.get_manager(name)
    except KeyError as exc:
        explanation = str(exc.args[0])
    else:  # a family that appeared since the report was taken
        explanation = f"{name!r} is not a plugin name"
    return f"{explanation}; plugins: {', '.join(info.name for info in report)}"


def _not_loaded(name: str, plugin: registry.PluginInfo) -> Target:
    failed = Outcome("entry_point", "packaging", "failed", _with_hint(plugin.not_in_use()))
    return Target(name, plugin, None, [failed])


TESTING_EXTRA = "pip install 'accelkit[testing]'"

_PYTEST_MISSING = ("No module named 'pytest'", "import of pytest halted")


def _with_hint(message: str) -> str:
    """``message``, plus what to install when it says pytest is missing (a plugin's test code
    needs the testing extra; ``accelkit check`` itself never does)."""
    if any(text in message for text in _PYTEST_MISSING):
        return f"{message} (pytest is in the testing extra: {TESTING_EXTRA})"
    return message


def check_manager(manager: AcceleratorManager, replay: Optional[Host]) -> list[Outcome]:
    """Every check on ``manager``, with its registered host builder, in a scratch directory."""
    try:
        builder = host_builder(manager.name)
        reason, broken = "", False
    except LookupError as exc:
        # None declared: the checks that need hosts are skipped. Declared but unusable: they
        # fail, since the plugin's packaging is wrong.
        builder, reason = None, _with_hint(str(exc))
        broken = isinstance(exc, BrokenHostBuilder)
    with tempfile.TemporaryDirectory(prefix="accelkit-check-") as scratch:
        subject = Subject(
            manager=manager,
            workspace=Path(scratch),
            make_host=builder,
            no_host_reason=reason,
            host_error=broken,
            replay=replay,
        )
        return run_checks(subject)


def render(target: Target) -> str:
    """A readable report: per topic, each check's status, with the message when not passed.
    The plugin's own text (its name, a message quoting what it raised) is
    :func:`~accelkit.cli.printable` line by line: it never drives the terminal."""
    plugin = target.plugin
    where = plugin.describe() if plugin is not None else "plugin not found"
    manager = f"{type(target.manager).__name__}, " if target.manager is not None else ""
    lines = [printable(f"accelkit check {target.family}: {manager}{where}")]
    for topic in TOPICS:
        outcomes = [o for o in target.outcomes if o.topic == topic]
        if outcomes:
            lines.append(f"  {topic}")
        for outcome in outcomes:
            lines.append(f"    {_MARKS[outcome.status]:<5} {outcome.check}")
            if outcome.message and outcome.status != "passed":
                lines += [f"          {printable(line)}" for line in outcome.message.splitlines()]
    counts = {s: sum(o.status == s for o in target.outcomes) for s in _MARKS}
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    verdict = "PASSED" if target.ok else "FAILED"
    lines.append(f"  {verdict}: {summary}")
    return "\n".join(lines)
