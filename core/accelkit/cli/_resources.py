"""``accelkit resources``: this node's resources in the format of the engine that will use them.

``ray start --head $(accelkit resources --format ray)``, ``accelkit resources --format gres >
/etc/slurm/gres.conf``, ``accelkit resources --format nfd > features.d/accelkit``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from accelkit.cli import EXIT_OK
from accelkit.cli._common import (
    add_override_option,
    host_from_args,
    print_json,
    say_exclusion_warnings,
)

FORMATS = ("json", "ray", "dask", "gres", "nfd")


def register(verbs: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``resources`` verb."""
    parser = verbs.add_parser(
        "resources",
        parents=[common],
        help="print this node's resources for Ray, Dask, SLURM or Kubernetes",
        description=(
            "Detect this node (or the snapshot given with --host) and print its resources and "
            "labels as one engine reads them: json (resources and labels), ray (`ray start` "
            "arguments), dask (the `dask worker --resources` option), gres (SLURM gres.conf "
            "lines, with the slurm.conf Gres= string in a comment) or nfd (a Kubernetes Node "
            "Feature Discovery feature file)."
        ),
        epilog="Example: ray start --head $(accelkit resources --format ray)",
    )
    parser.add_argument("--format", choices=FORMATS, default="json", help="default: json")
    add_override_option(parser, "as `accelkit ls` does")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Detect the node and print it in the chosen format."""
    from accelkit import exports
    from accelkit._stdout import stdout_aside
    from accelkit.node._detect import detect_node

    with stdout_aside():  # what plugins print is no part of the export
        node = detect_node(host_from_args(args), dict(args.override) or None)
    say_exclusion_warnings("resources", node)
    if args.format == "json":
        print_json({"resources": node.resources, "labels": node.labels})
    elif args.format == "ray":
        print(" ".join(exports.to_ray(node)))
    elif args.format == "dask":
        print(exports.to_dask(node))
    else:
        sys.stdout.write(exports.to_gres(node) if args.format == "gres" else exports.to_nfd(node))
    return EXIT_OK
