"""``accelkit check [NAME ...] [--json]``: run the conformance kit on installed plugins.

NAME is a family (``nvidia``) or a plugin name (``acme``); without one, every discovered family
is checked. Hosts with N devices come from the family's registered builder (built-ins, or the
plugin's ``accelkit.testing`` entry point); without one the checks that need hosts are skipped
and say so. The checks need no pytest. Exit status: 0 all passed, 1 a check failed or a plugin
did not load, 2 an unknown name. ``accelkit check`` needs no pytest (the ``accelkit[testing]``
extra): when a plugin's own test code (its host builder) needs it, the report says so.
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["register", "run"]


def register(verbs: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``check`` verb."""
    parser = verbs.add_parser(
        "check",
        parents=[common],
        help="run the plugin conformance kit on installed plugins",
        description=(
            "Prove an installed plugin right before schedulers load it: contract, detection "
            "(on fake hosts, under an audit hook), visibility, quantities and placement, import "
            "hygiene and packaging. With --host DIR, also detect on that node snapshot under "
            "the audit."
        ),
    )
    parser.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help="a family (nvidia) or plugin name (acme); default: every discovered family",
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Check every target, print the report, and exit 1 if any check failed."""
    from accelkit.cli._checking import run as run_checks

    return run_checks(args)
