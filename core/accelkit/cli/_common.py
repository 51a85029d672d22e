"""What several verbs share: choosing the host, reading ``RES=Q``, printing JSON and tables."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from fractions import Fraction
from typing import Any, Union

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


Quantity = Union[float, Fraction]


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


def override(text: str) -> tuple[str, Quantity]:
    """``"GPU=2"`` -> ``("GPU", 2.0)``, for argparse (a bad one is a usage error)."""
    try:
        return resource_quantity(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def resource_quantity(item: str) -> tuple[str, Quantity]:
    """``"GPU=0.5"`` -> ``("GPU", 0.5)``; ``"GPU=1/3"`` keeps the exact fraction. Every
    ``RES=Q`` on the command line (``-r``, ``--override``) is read here."""
    name, text = resource_text(item)
    try:
        return name, quantity(text)
    except ValueError as error:
        raise ValueError(f"{item!r}: {error}") from None


def quantity(text: str) -> Quantity:
    """``"0.5"`` -> 0.5; ``"1/3"`` keeps the exact fraction; ``ValueError`` for anything else."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return Fraction(text)
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"{text!r} is not a number (write 0.5, 2 or 1/3)") from None


def resource_text(item: str) -> tuple[str, str]:
    """``"RES=TEXT"`` split and stripped; ``ValueError`` unless both sides are there."""
    name, sep, text = item.partition("=")
    if not sep or not name.strip() or not text.strip():
        raise ValueError(f"{item!r} is not RES=Q (for example GPU=0.5)")
    return name.strip(), text.strip()


def table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> list[str]:
    """Left-aligned columns separated by two spaces, no trailing blanks: every verb's tables."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]
    return [
        "  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip()
        for row in (header, *rows)
    ]
