"""``accelkit ls``: this node's accelerators, resources and labels, and why detection said so."""

from __future__ import annotations

import argparse
import warnings
from typing import TYPE_CHECKING, Any, Optional

from accelkit.cli import EXIT_OK, printable
from accelkit.cli._common import (
    add_override_option,
    autoload_off_line,
    host_from_args,
    print_json,
    table,
)

if TYPE_CHECKING:
    from accelkit.device import Device
    from accelkit.node._record import Node

COLUMNS = ("FAMILY", "RESOURCE", "ID", "TYPE", "MODEL", "MEMORY", "BUS ID", "NUMA", "SOURCE")


def register(verbs: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``ls`` verb."""
    parser = verbs.add_parser(
        "ls",
        parents=[common],
        help="list this node's accelerators, resources and labels",
        description=(
            "Detect this node's accelerators (or replay a snapshot with --host DIR) and print "
            "the devices of every family, the node's resources and labels as schedulers see "
            "them, then detection warnings and errors. Honours CUDA_VISIBLE_DEVICES and the "
            "other families' visibility variables, ACCELKIT_OVERRIDE_RESOURCES and "
            "ACCELKIT_EXCLUDE_DEVICES."
        ),
        epilog="Exit status: 0, also when there is no accelerator; 2 on bad usage or input.",
    )
    parser.add_argument("--json", action="store_true", help="print the node as JSON")
    add_override_option(parser, "0 removes it; wins over ACCELKIT_OVERRIDE_RESOURCES")
    parser.add_argument(
        "--label-prefix",
        default=None,
        metavar="PREFIX",
        help="prefix of the node labels (default 'accelkit/'; e.g. 'example.com/' for "
        "Kubernetes node labels of your own domain)",
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="also print informational diagnostics"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from accelkit import registry
    from accelkit._stdout import stdout_aside
    from accelkit.node._detect import detect_node
    from accelkit.node._resources import DEFAULT_LABEL_PREFIX

    prefix = DEFAULT_LABEL_PREFIX if args.label_prefix is None else args.label_prefix
    # A plugin skipped, or a hook of one that failed, is an error of the node: the listing's
    # diagnostics say it, once.
    with warnings.catch_warnings(), stdout_aside():
        warnings.simplefilter("ignore", registry.PluginWarning)
        node = detect_node(host_from_args(args), dict(args.override) or None, label_prefix=prefix)
    if args.json:
        print_json(node.to_dict())
        return EXIT_OK
    lines = report(node, verbose=args.verbose)
    autoload_off = autoload_off_line()
    if autoload_off:
        lines += ["", autoload_off]
    print("\n".join(lines))
    return EXIT_OK


def report(node: Node, *, verbose: bool = False) -> list[str]:
    """The human-readable listing of ``node``, as lines. What plugins wrote (names, labels, a
    diagnostic's message, an exception's text) is :func:`~accelkit.cli.printable`: each entry
    stays one line, and none drives the terminal."""
    lines: list[str] = []
    if node.devices:
        lines += table([_row(d) for d in node.devices], COLUMNS)
    else:
        lines.append("No accelerators found on this node.")
    if node.resources:
        lines += ["", "Resources:"]
        lines += [printable(f"  {n} = {_number(v)}") for n, v in node.resources.items()]
    if node.labels:
        lines += ["", "Labels:"]
        lines += [printable(f"  {name} = {value}") for name, value in node.labels.items()]
    shown = [d for d in node.diagnostics if verbose or d.level != "info"]
    if shown:
        lines += ["", "Diagnostics:"]
        lines += [printable(f"  {d.level:<7} {d.family}: {d.message}") for d in shown]
    hidden = len(node.diagnostics) - len(shown)
    if hidden:
        lines += ["", f"({hidden} informational diagnostic(s); -v shows them)"]
    return lines


def _row(device: Device) -> list[str]:
    return [
        device.family,
        device.resource_name,
        device.id,
        _text(device.type_label),
        _text(device.model),
        "-" if device.memory_bytes is None else f"{device.memory_bytes / 2**30:.1f} GiB",
        _text(device.pci_bus_id),
        _text(device.numa_node),
        device.source or "-",
    ]


def _text(value: Optional[object]) -> str:
    return "-" if value is None or value == "" else str(value)


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"
