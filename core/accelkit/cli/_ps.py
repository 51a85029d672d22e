"""``accelkit ps``: what the node's ledger holds now, who holds it, and who waits."""

from __future__ import annotations

import argparse
import time
from typing import Any

from accelkit.cli import EXIT_OK
from accelkit.cli._common import add_ledger_option, grant_text, open_ledger, print_json, table


def register(verbs: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``ps`` verb."""
    parser = verbs.add_parser(
        "ps",
        help="list the grants this node's ledger holds, their holders and who waits",
        description=(
            "List the live grants of this node's ledger (holders that ended are reclaimed "
            "first): the holding process, how long it has held, the devices and its command; "
            "then the requests waiting, in the order they will be served."
        ),
        epilog="Exit status: 0; 2 when the ledger cannot be read.",
    )
    parser.add_argument("--json", action="store_true", help="print the listing as JSON")
    add_ledger_option(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    view = open_ledger(args).view()
    now = time.time()
    if args.json:
        print_json(
            {
                "ledger": str(view.path),
                "node": view.node,
                "grants": [
                    {
                        **h.holder.to_dict(),
                        "command": h.holder.command(),
                        "since": h.since,
                        "age_seconds": round(now - h.since, 3),
                        "ids": h.grant.ids,
                        "grant": h.grant.to_dict(),
                    }
                    for h in view.holdings
                ],
                "waiting": [
                    {
                        "ticket": w.ticket,
                        **w.holder.to_dict(),
                        "command": w.holder.command(),
                        "wants": w.wants,
                        "age_seconds": round(now - w.since, 3),
                    }
                    for w in view.waiting
                ],
            }
        )
        return EXIT_OK
    print(f"ledger {view.path} ({view.node or 'no node yet'})")
    rows = [
        [str(h.holder.pid), _age(now - h.since), grant_text(h.grant), h.holder.command()]
        for h in view.holdings
    ]
    print("\n".join(table(rows, ("PID", "AGE", "HOLDS", "COMMAND"))))
    if view.waiting:
        rows = [
            [str(w.ticket), str(w.holder.pid), _age(now - w.since), w.wants, w.holder.command()]
            for w in view.waiting
        ]
        print()
        print("\n".join(table(rows, ("TICKET", "PID", "WAITING", "WANTS", "COMMAND"))))
    return EXIT_OK


def _age(seconds: float) -> str:
    """``42s``, ``3m05s``, ``2h07m``."""
    whole = max(int(seconds), 0)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
