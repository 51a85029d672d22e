"""What several verbs share: choosing the host, reading overrides, printing JSON."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..host import Host, LocalHost


def host_from_args(args: argparse.Namespace) -> Host:
    """The snapshot named by ``--host DIR``, or this machine."""
    if getattr(args, "host", None):
        from ..snapshot import load_snapshot

        return load_snapshot(args.host)
    return LocalHost()


def print_json(data: Any) -> None:
    """Stable, readable JSON on stdout."""
    json.dump(data, sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")


def add_override_option(parser: argparse.ArgumentParser, note: str) -> None:
    """``--override RES=N`` (repeatable): detect the node as having N of resource RES."""
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        type=override,
        metavar="RES=N",
        help=f"treat the node as having N of resource RES (repeatable; {note})",
    )


def override(text: str) -> tuple[str, float]:
    """``"GPU=2"`` -> ``("GPU", 2.0)``, for argparse (a bad one is a usage error)."""
    name, sep, value = (part.strip() for part in text.partition("="))
    try:
        if not (sep and name):
            raise ValueError
        return name, float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not RES=N (for example GPU=2 or custom=0.5)"
        ) from None
