"""``accelkit ps``: what the node's ledger holds now, who holds it, and who waits.

Steps (grants taken inside a grant, by an ``accelkit run`` or a pool inside a job) are listed
under their grant, as ``ps f`` lists a process's children. A ledger this user may only read (a
group's) is listed as it is: holders that ended are left out of the listing, not out of the file.
"""

from __future__ import annotations

import argparse
import pwd
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Optional

from accelkit.cli import EXIT_OK, printable
from accelkit.cli._common import (
    add_ledger_option,
    host_from_args,
    open_ledger,
    print_json,
    table,
)
from accelkit.schedule._grant import devices_text, grant_text, shared_resources

if TYPE_CHECKING:
    from pathlib import Path

    from accelkit.device import Device
    from accelkit.ledger._ledger import Ledger
    from accelkit.ledger._views import Holding, LedgerView, Waiting

STEP = "\\_ "
"""What marks a step under its grant in the PID column (as ``ps f`` marks a child)."""


def register(verbs: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``ps`` verb."""
    parser = verbs.add_parser(
        "ps",
        parents=[common],
        help="list the grants this node's ledger holds, their holders and who waits",
        description=(
            "List the live grants of this node's ledger (holders that ended are reclaimed "
            "first): the holding process, its user, how long it has held, the devices and its "
            "command, with steps under their grant; then the requests waiting, in the order "
            "they will be served. With --host, also the devices of that node that are free, "
            "and the share free of a device that grants hold part of (GPU 0 (0.5 free))."
        ),
        epilog="Exit status: 0; 2 when the ledger cannot be read.",
    )
    parser.add_argument("--json", action="store_true", help="print the listing as JSON")
    add_ledger_option(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """List the ledger (and, with ``--host``, what of that node is free)."""
    ledger = open_ledger(args, host=host_from_args(args) if args.host else None)
    view = ledger.view()
    free = _free(ledger, view) if args.host else None
    node_devices = ledger.node.devices if args.host else []
    held = [device for h in view.holdings for device, _share in h.grant.devices]
    shared = shared_resources([*node_devices, *held])  # whose ids alone are ambiguous
    now = time.time()
    holdings = _in_tree_order(view.holdings)
    if args.json:
        print_json(
            {
                "ledger": str(view.path),
                "node": view.node,
                "grants": [
                    {
                        **h.holder.to_dict(),
                        "user": _user(h.user),
                        "uid": h.user,
                        "command": h.holder.command(),
                        "note": h.note,
                        "since": h.since,
                        "age_seconds": round(now - h.since, 3),
                        "ids": h.grant.ids,
                        "ids_by_family": h.grant.ids_by_family(),
                        "token": h.grant.token,
                        "parent": h.parent,
                        "grant": h.grant.to_dict(),
                    }
                    for h, _depth in holdings
                ],
                "waiting": [
                    {
                        "ticket": w.ticket,
                        **w.holder.to_dict(),
                        "user": _user(w.user),
                        "uid": w.user,
                        "command": w.holder.command(),
                        "wants": w.wants,
                        "sees": None if w.sees is None else [list(key) for key in w.sees],
                        "parent": w.parent,
                        "age_seconds": round(now - w.since, 3),
                    }
                    for w in view.waiting
                ],
                **({} if free is None else _free_json(free)),
            }
        )
        return EXIT_OK
    print(printable(f"ledger {view.path} ({view.node or _unused(view.path)})"))
    rows = [
        [
            "    " * (depth - 1) + (STEP if depth else "") + str(h.holder.pid),
            _user(h.user),
            _age(now - h.since),
            grant_text(h.grant, shared),
            h.note or h.holder.command(),
        ]
        for h, depth in holdings
    ]
    print("\n".join(table(rows, ("PID", "USER", "AGE", "HOLDS", "COMMAND"))))
    if view.waiting:
        rows = [
            [
                str(w.ticket),
                str(w.holder.pid),
                _user(w.user),
                _age(now - w.since),
                _wants_text(w),
                w.holder.command(),
            ]
            for w in view.waiting
        ]
        print()
        print("\n".join(table(rows, ("TICKET", "PID", "USER", "WAITING", "WANTS", "COMMAND"))))
    if free is not None:
        print()
        print(f"free: {_free_text(free, shared_resources(node_devices))}")
    return EXIT_OK


def _in_tree_order(holdings: Sequence[Holding]) -> list[tuple[Holding, int]]:
    """Each grant of the node, followed by its steps (and theirs), with their depth."""
    steps: dict[Optional[int], list[Holding]] = {}
    tokens = {h.grant.token for h in holdings}
    for holding in holdings:
        parent = holding.parent if holding.parent in tokens else None
        steps.setdefault(parent, []).append(holding)
    ordered: list[tuple[Holding, int]] = []

    def visit(parent: Optional[int], depth: int) -> None:
        for holding in steps.get(parent, []):
            ordered.append((holding, depth))
            visit(holding.grant.token, depth + 1)

    visit(None, 0)
    return ordered


def _free(ledger: Ledger, view: LedgerView) -> list[tuple[Device, float]]:
    """The ``--host`` node's devices with a share free, and that share: 1 where no grant of the
    node holds any of it, and what its grants leave of a device of a fractional family (a
    request for that much still fits: ``GPU=0.5`` beside another's ``GPU=0.5``). A ledger kept
    for another node holds none of them (said on stderr)."""
    from accelkit.ledger._identity import allocatable, fingerprint
    from accelkit.quantities import UNIT, from_units, to_units

    node = ledger.node
    summary = fingerprint(node)["summary"]
    if view.node is not None and view.node != summary:
        print(
            f"accelkit ps: the ledger {view.path} serves another node ({view.node}), not this "
            f"one ({summary}); it holds nothing of this node",
            file=sys.stderr,
        )
        held: dict[tuple[str, str], int] = {}
    else:
        held = {}  # units, of the grants of the node (a step's share lies within its grant's)
        for holding in view.holdings:
            if holding.parent is not None:
                continue
            for device, share in holding.grant.devices:
                key = (device.family, device.id)
                held[key] = held.get(key, 0) + to_units(share)
    free = []
    for device in allocatable(node):
        taken = held.get((device.family, device.id), 0)
        policy = node.policies.get(device.family)
        if taken == 0:
            free.append((device, 1.0))
        elif taken < UNIT and policy is not None and policy.fractional:
            free.append((device, from_units(UNIT - taken)))
    return free


def _free_text(free: Sequence[tuple[Device, float]], shared: frozenset[str]) -> str:
    """``GPU 1,2,3; GPU 0 (0.5 free)``: the devices free whole, then those with a share free."""
    whole = [(device, share) for device, share in free if share == 1.0]
    parts = [devices_text(whole, shared)] if whole else []
    partly: dict[tuple[float, str, str], list[tuple[Device, float]]] = {}
    for device, share in free:
        if share != 1.0:
            key = (share, device.resource_name, device.family)
            partly.setdefault(key, []).append((device, 1.0))
    parts += [f"{devices_text(group, shared)} ({key[0]:g} free)" for key, group in partly.items()]
    return "; ".join(parts) or "nothing"


def _free_json(free: Sequence[tuple[Device, float]]) -> dict[str, dict[str, Any]]:
    """``free``: ids of the devices free whole, by resource, as ``Grant.ids`` gives a grant's;
    ``free_by_family``: by family, as ``Grant.ids_by_family()``, the unambiguous form where
    families share a resource; ``partly_free`` and ``partly_free_by_family``: ``[id, share]``
    for each device of a fractional family that grants hold part of, the share it has free, in
    the same two forms (lists, as ``free``: an id may stand twice by resource)."""
    by_resource: dict[str, list[str]] = {}
    by_family: dict[str, list[str]] = {}
    partly: dict[str, list[tuple[str, float]]] = {}
    partly_by_family: dict[str, list[tuple[str, float]]] = {}
    for device, share in free:
        if share == 1.0:
            by_resource.setdefault(device.resource_name, []).append(device.id)
            by_family.setdefault(device.family, []).append(device.id)
        else:
            partly.setdefault(device.resource_name, []).append((device.id, share))
            partly_by_family.setdefault(device.family, []).append((device.id, share))
    return {
        "free": by_resource,
        "free_by_family": by_family,
        "partly_free": partly,
        "partly_free_by_family": partly_by_family,
    }


def _user(uid: Optional[int]) -> str:
    """The user's name (its uid where it has none; ``?`` for a grant recorded without one)."""
    if uid is None:
        return "?"
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _age(seconds: float) -> str:
    """``42s``, ``3m05s``, ``2h07m``."""
    whole = max(int(seconds), 0)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def _unused(path: Path) -> str:
    """What a ledger that never served a node is: a path mistyped (or a directory that does not
    exist) reads as an idle node otherwise."""
    if not path.parent.is_dir():
        return f"no such directory: {path.parent}; nothing has used this ledger"
    if not path.exists():
        return "no such file yet: nothing has used this ledger"
    return "no node yet"


def _wants_text(waiting: Waiting) -> str:
    """``GPU=1``; ``GPU=1 (sees nvidia:0)`` for a process that sees some devices only (it waits
    for those, and lets other grants pass); ``(step of grant 7)`` for a step."""
    notes = []
    if waiting.sees is not None:
        seen = ", ".join(f"{family}:{device}" for family, device in waiting.sees)
        notes.append(f"sees {seen or 'no device'}")
    if waiting.parent is not None:
        notes.append(f"step of grant {waiting.parent}")
    return f"{waiting.wants} ({'; '.join(notes)})" if notes else waiting.wants
