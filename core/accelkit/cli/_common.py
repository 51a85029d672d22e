"""What several verbs share: choosing the host, reading ``RES=Q``, printing JSON and tables."""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Optional, Union

from accelkit._shown import shown
from accelkit.cli import printable
from accelkit.host import Host, LocalHost
from accelkit.quantities import MAX_QUANTITY, UNIT

if TYPE_CHECKING:
    from fractions import Fraction

    from accelkit.ledger._holder import Holder
    from accelkit.ledger._ledger import Ledger
    from accelkit.node._record import Node
    from accelkit.schedule._grant import Grant


OPERATOR_PREFIX = "ACCELKIT_"
"""The operator's variables, which ``--host`` takes from the shell; vendor ones it replays."""


def host_from_args(args: argparse.Namespace) -> Host:
    """The snapshot named by ``--host DIR``, or this machine.

    A snapshot replays the recorded node, vendor variables included: this shell's
    (``NVIDIA_VISIBLE_DEVICES``, set in every GPU container, or ``CUDA_VISIBLE_DEVICES``)
    describe this machine, not that one. Only the operator's ``ACCELKIT_*`` variables that
    detection reads (``ACCELKIT_OVERRIDE_RESOURCES``, ``ACCELKIT_EXCLUDE_DEVICES``, ...) come from
    this shell, in place of the recorded ones; one line on stderr names them, and detection checks
    them as it checks the recorded ones.
    """
    if not getattr(args, "host", None):
        return LocalHost()
    from accelkit import registry
    from accelkit.host import load_snapshot
    from accelkit.node._operator import CONFIG_ENV_VARS

    variables = (n for m in registry.managers() for n in registry.variables_read(m))
    names = {n for n in (*CONFIG_ENV_VARS, *variables) if n.startswith(OPERATOR_PREFIX)}
    shell = {name: os.environ[name] for name in sorted(names) if name in os.environ}
    if shell:
        shown = ", ".join(f"{name}={value!r}" for name, value in shell.items())
        print(
            f"accelkit: --host {args.host}: this shell's {printable(shown)} replace(s) the "
            "snapshot's",
            file=sys.stderr,
        )
    return load_snapshot(args.host, env=shell)


def autoload_off_line() -> Optional[str]:
    """What ``ls`` and ``plugins`` end with when ``ACCELKIT_DISABLE_PLUGIN_AUTOLOAD`` kept the
    third-party plugins out (those ``ACCELKIT_REQUIRE_PLUGINS`` names load all the same)."""
    from accelkit import registry
    from accelkit._settings import names

    if registry.autoload_enabled(os.environ):
        return None
    line = f"{registry.AUTOLOAD_OFF_VAR} is set: third-party plugins were not loaded"
    builtin = {module.rpartition(".")[2] for module in registry.BUILTIN_PLUGINS}
    required = [name for name in names(os.environ, registry.REQUIRE_VAR) if name not in builtin]
    if required:
        line += f", but for those {registry.REQUIRE_VAR} names ({', '.join(required)})"
    return line + "."


def print_json(data: Any) -> None:
    """Stable, readable JSON on stdout, written at once: ``json.dump`` writes each token on its
    own (hundreds of system calls on an unbuffered stdout) and leaves half a document behind
    when a value cannot be encoded."""
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False) + "\n")


Quantity = Union[int, float, "Fraction"]
"""A quantity as written: ``fractions`` (and the ``decimal`` it imports) loads only when one
is written as ``1/3``, not at every start."""

WHOLE_TEXT = r"(?a)[+-]?[0-9]+"
DECIMAL_TEXT = r"(?a)[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
FRACTION_TEXT = r"(?a)[+-]?[0-9]+/[0-9]+"
SMALLEST = 1 / UNIT
"""The smallest quantity a request may name: one unit (0.0001)."""
LONGEST_QUANTITY = 40
"""Characters; no quantity a scheduler takes needs more (and a message echoes the text)."""


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


def add_request_options(parser: argparse.ArgumentParser, verb: str) -> None:
    """``-r RES=Q`` (repeatable) and ``--hide-others``: a request, and whether its worker sees
    the families it did not ask for."""
    parser.add_argument(
        "-r",
        "--request",
        action="append",
        default=[],
        metavar="RES=Q",
        help=f"{verb} Q of resource RES (repeatable): GPU=0.5, neuron_cores=2, TPU=4, "
        "accelerator_type=H100",
    )
    parser.add_argument(
        "--hide-others",
        action="store_true",
        help="also hide the node's accelerator families the request does not use",
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
        raise ValueError(f"{shown(item, 60)}: {error}") from None


def quantity(text: str) -> Quantity:
    """``"0.5"`` -> 0.5, ``"2"`` -> 2 (exact, however many digits), ``"1/3"`` the exact
    fraction; ``ValueError`` saying why for anything else. One ASCII grammar (digits, a decimal
    point, an exponent, a sign): ``float()`` alone would also read ``٣`` (an Arabic-Indic
    three), ``1_0`` (ten), ``inf`` and ``nan``, and round a long whole number."""
    text = text.strip()
    if len(text) > LONGEST_QUANTITY:
        raise ValueError(
            f"{shown(text, 20)} is {len(text)} characters, too long for a quantity (write 0.5, "
            "2 or 1/3)"
        )
    if re.fullmatch(WHOLE_TEXT, text):
        return int(text)
    if re.fullmatch(DECIMAL_TEXT, text):
        number = float(text)
        nonzero = re.search("[1-9]", re.split("[eE]", text)[0]) is not None  # its digits
        if nonzero and text.startswith("-"):
            raise ValueError(
                f"{text!r} is negative: ask for 0 (nothing), a fraction from {SMALLEST} to 1, or "
                "a whole number"
            )
        if math.isinf(number):
            raise ValueError(f"{text!r} is above the largest quantity, {MAX_QUANTITY}")
        if nonzero and number < SMALLEST:
            raise ValueError(  # a request writes what it means: 1e-30 is no call for nothing
                f"{text!r} is below the smallest quantity, {SMALLEST}: ask for 0 (nothing) or "
                f"at least {SMALLEST}"
            )
        return number
    if re.fullmatch(FRACTION_TEXT, text):
        if int(text.partition("/")[2]) == 0:
            raise ValueError(f"{text!r} divides by zero (write 0.5, 2 or 1/3)")
        from fractions import Fraction

        return Fraction(text)
    raise ValueError(f"{shown(text)} is not a number (write 0.5, 2 or 1/3)")


def quantity_argument(text: str) -> Quantity:
    """:func:`quantity` for argparse: its reason becomes the usage error (argparse would say
    only "invalid value", echoing the whole argument)."""
    try:
        return quantity(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def resource_text(item: str) -> tuple[str, str]:
    """``"RES=TEXT"`` split and stripped; ``ValueError`` unless both sides are there."""
    name, sep, text = item.partition("=")
    if not sep or not name.strip() or not text.strip():
        raise ValueError(f"{item!r} is not RES=Q (for example GPU=0.5)")
    return name.strip(), text.strip()


def say_exclusion_warnings(verb: str, node: Node) -> None:
    """One ``accelkit VERB: warning:`` line for each ``ACCELKIT_EXCLUDE_DEVICES`` entry that is
    malformed or matches no device. The verbs that hand out devices would otherwise act on a
    typo silently, handing out the GPU the operator meant to keep off (``ls`` lists them)."""
    from accelkit.node._operator import EXCLUDE_ENV

    for diagnostic in node.diagnostics:
        if diagnostic.level != "info" and diagnostic.message.startswith(EXCLUDE_ENV):
            print(f"accelkit {verb}: warning: {printable(diagnostic.message)}", file=sys.stderr)


def table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> list[str]:
    """Left-aligned columns separated by two spaces, no trailing blanks: every verb's tables.
    Cells are :func:`~accelkit.cli.printable`: what fills them comes from vendor tools, other
    users' command lines and the ledger, and must never drive the terminal or break a row."""
    cells = [[printable(str(cell)) for cell in row] for row in (header, *rows)]
    widths = [max(len(cell) for cell in column) for column in zip(*cells)]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in cells
    ]


def add_ledger_option(parser: argparse.ArgumentParser) -> None:
    """``--ledger PATH``: the ledger a group shares instead of the per-user default."""
    parser.add_argument(
        "--ledger",
        metavar="PATH",
        default=None,
        help="the node's ledger file (default: $ACCELKIT_LEDGER, else per user in "
        "$XDG_RUNTIME_DIR/accelkit/ or the temp directory); a group shares one by giving "
        "the same PATH in a directory every member can write",
    )


def open_ledger(
    args: argparse.Namespace,
    node: Optional[Node] = None,
    *,
    host: Optional[Host] = None,
    overrides: Optional[Mapping[str, object]] = None,
) -> Ledger:
    """The ledger ``--ledger`` names (or the default one), for ``node``; without one, for the
    physical node of ``host`` (this machine when None), of which this process takes what it sees
    (with ``overrides``)."""
    from accelkit.ledger._ledger import Ledger

    return Ledger(args.ledger, node, host=host, overrides=overrides)


def hidden_families(
    hide_others: bool, grant: Grant, request: Mapping[str, object], node: Node
) -> Union[bool, frozenset[str]]:
    """What ``Grant.env``'s ``hide_others`` hides from the worker of ``grant`` on ``node``: every
    family the grant does not touch with ``--hide-others`` or for a grant of no device (as Ray
    shows a task that asks for no GPU none); otherwise the families that serve a resource asked
    for zero (``-r GPU=0 -r NPU=1``: the NPU, and no GPU), which the grant itself does not
    record. ``run`` and ``env`` both ask it, so ``eval "$(accelkit env ...)"`` gives a shell the
    environment ``accelkit run`` gives its command."""
    if hide_others or not grant.devices:
        return True
    zero = {name for name, quantity in request.items() if quantity == 0}
    return frozenset(d.family for d in node.devices if d.resource_name in zero)


def left_alone(families: Iterable[str]) -> list[str]:
    """The ``families`` that ``ACCELKIT_NOSET_<FAMILY>=1`` in this environment leaves alone: their
    variables are neither written nor hidden, so a worker sees the devices its inherited
    variables show, not the grant's."""
    from accelkit._settings import flag
    from accelkit.schedule._worker_env import NOSET_PREFIX

    return [f for f in families if flag(os.environ, NOSET_PREFIX + f.upper())]


def left_alone_text(families: Sequence[str], reader: str) -> str:
    """``ACCELKIT_NOSET_NVIDIA set: the command sees ...``: what :func:`left_alone` families
    show ``reader`` (``"the command"``, ``"this shell"``), in a sentence."""
    from accelkit.schedule._worker_env import NOSET_PREFIX

    switches = ", ".join(f"{NOSET_PREFIX}{f.upper()}" for f in families)
    return (
        f"{switches} set: {reader} sees the devices of {', '.join(families)} that its inherited "
        f"variables show, not the grant's (unset {switches} for the grant's)"
    )


def process_text(holder: Holder) -> str:
    """``pid 41 (sleep 60)``."""
    command = printable(holder.command())  # another user's, which may hold escapes
    return f"pid {holder.pid} ({command})" if command else f"pid {holder.pid}"
