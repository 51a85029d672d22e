"""``accelkit plugins``: which plugins this Python finds, what each provides, and what failed."""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence
from typing import Any, Optional

from accelkit.cli import EXIT_FAILED, EXIT_OK, printable
from accelkit.cli._common import autoload_off_line, host_from_args, print_json, table

COLUMNS = ("NAME", "ORIGIN", "DISTRIBUTION", "STATUS", "FAMILIES")


def register(verbs: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``plugins`` verb."""
    parser = verbs.add_parser(
        "plugins",
        parents=[common],
        help="list the plugins found, the families they provide, and any that failed",
        description=(
            "List every accelkit plugin this Python environment provides: the built-ins and the "
            "entry points of group 'accelkit', with their distribution, status and families. "
            "Honours ACCELKIT_DISABLE_PLUGINS, ACCELKIT_DISABLE_PLUGIN_AUTOLOAD and "
            "ACCELKIT_REQUIRE_PLUGINS. With --detect, or --host DIR, also detect the node as "
            "`accelkit ls` does, within the same time budgets: each family's devices, and each "
            "plugin's problems (its detection's errors, a vendor command or library cut by its "
            "budget included). Without, nothing is detected."
        ),
        epilog=(
            "Exit status: 0 when every plugin is ok, disabled or replaced; 1 when a plugin failed "
            "to load (status 'error') or a required plugin is not in use; 2 on bad usage."
        ),
    )
    parser.add_argument(
        "--json", action="store_true", help="print a JSON list with one record per plugin"
    )
    parser.add_argument(
        "--detect",
        action="store_true",
        help="detect this machine (--host DIR: that snapshot, which implies it) and show each "
        "family's devices and each plugin's problems",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Print the plugin report; the table already shows what the load warnings would say."""
    from accelkit import registry
    from accelkit._stdout import stdout_aside
    from accelkit.errors import PluginError

    with warnings.catch_warnings(), stdout_aside():  # what plugins print is not the report
        warnings.simplefilter("ignore", registry.PluginWarning)
        try:
            registry.managers()
            required_error = None
        except PluginError as exc:
            required_error = str(exc)
        detect = (args.detect or args.host) and not required_error
        counts = _device_counts(args) if detect else None
        report = registry.plugin_report()  # after detection: it carries each plugin's problems
    records = [info.to_dict() for info in report]
    if counts is not None:
        for record in records:
            record["devices"] = {f: counts.get(f) for f in record["families"]}
    if args.json:
        print_json(records)
    else:
        _print_table(records, counts is not None)
        autoload_off = autoload_off_line()
        if autoload_off:
            print(f"\n{autoload_off}")
    if required_error:
        print(f"accelkit plugins: {printable(required_error)}", file=sys.stderr)
    failed = required_error or any(info.status == "error" for info in report)
    return EXIT_FAILED if failed else EXIT_OK


def _device_counts(args: argparse.Namespace) -> dict[str, Optional[int]]:
    """Devices each family offers, from one node detection as ``accelkit ls`` runs it, so its
    time budgets apply and each family's errors reach the plugin report. Counted: what the
    family's ``detect()`` returned that a worker may use (``Device.offered``), before the
    operator's visibility variables, exclusions and overrides, which say nothing of the plugin.
    None where errors left the family without a device: not known, rather than none."""
    from accelkit.node._detect import run_detection
    from accelkit.registry import default_registry

    detection = run_detection(host_from_args(args), default_registry())
    failed = {d.family for d in detection.node.diagnostics if d.level == "error"}
    counts: dict[str, Optional[int]] = {}
    for family in detection.families:
        name = family.manager.name
        unknown = not family.detected and name in failed
        counts[name] = None if unknown else sum(1 for d in family.detected if d.offered)
    return counts


def _print_table(records: Sequence[dict[str, Any]], with_devices: bool) -> None:
    """One row per plugin; the last column explains any status but ok, or what went wrong in the
    plugin's latest detection."""
    header = [*COLUMNS, *(["DEVICES"] if with_devices else []), "NOTE"]
    rows = []
    for r in records:
        dist = f"{r['dist'] or '?'} {r['version'] or '?'}"
        row = [r["name"], r["origin"], dist, r["status"], ",".join(r["families"]) or "-"]
        if with_devices:
            devices = r.get("devices", {})
            row.append(",".join(f"{f}:{'?' if n is None else n}" for f, n in devices.items()))
        rows.append([*row, r["error"] or "; ".join([*r["problems"], *r["notes"]])])
    for line in table(rows, header):
        print(line)
