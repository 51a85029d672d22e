"""``accelkit env``: the environment of one grant, as shell lines, TaskProlog lines or JSON.

``eval "$(accelkit env -r GPU=1)"`` makes this shell see one GPU of this node, exactly as a
scheduler's worker holding that grant would. ``--format taskprolog`` prints the lines SLURM's
TaskProlog output is read as: the same ``export``/``unset`` words, each value verbatim (SLURM
does not unquote, so the shell format's quotes would reach the task). On any failure the verb
prints ``false`` on stdout besides the error on stderr (with ``--json``, nothing, as every
``--json`` verb), so the ``eval`` fails too; in a script, write
``out=$(accelkit env -r GPU=1) && eval "$out"``, which also stops when accelkit cannot run.

The verb takes nothing from the node's ledger: it answers as on an idle node. When the ledger
holds a device the environment names, one line on stderr says who holds it (``eval`` never
sees it), since a shell that uses it would share that device with its holder.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Optional

from accelkit.cli import EXIT_FAILED, EXIT_OK, describe
from accelkit.cli._common import (
    Quantity,
    add_ledger_option,
    add_override_option,
    add_request_options,
    hidden_families,
    host_from_args,
    left_alone,
    left_alone_text,
    open_ledger,
    print_json,
    process_text,
    resource_quantity,
    resource_text,
    say_exclusion_warnings,
)
from accelkit.schedule._grant import devices_text, shared_resources

if TYPE_CHECKING:
    from accelkit.host import Host
    from accelkit.schedule._grant import Grant

FAILURE_LINE = "false"
"""Printed on stdout when the verb fails, so that ``eval "$(accelkit env ...)"`` fails as well."""

TYPE_OPTION = "accelerator_type"
"""``-r accelerator_type=H100`` asks for a type, like ``acquire(..., accelerator_type="H100")``."""

FORMATS = ("shell", "taskprolog", "json")
"""What the verb prints: ``eval``-able shell lines, SLURM TaskProlog lines, or JSON."""

_SHELL_NAME = r"[A-Za-z_][A-Za-z0-9_]*"


def register(verbs: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``env`` verb."""
    parser = verbs.add_parser(
        "env",
        parents=[common],
        help="print the environment that makes a worker see the devices of one request",
        description=(
            "Detect this node (or the snapshot given with --host), grant the request as a "
            "scheduler would on an idle node (taking nothing from the node's ledger, and saying "
            "on stderr when the ledger holds a device it names), and print the worker "
            "environment accelkit run would give CMD (a request for no device, -r GPU=0, hides "
            "the node's devices; -r GPU=0 beside -r NPU=1 hides the GPUs) as shell lines: "
            "`export VAR=value`, and `unset VAR` for variables that must not be set. Use "
            'eval "$(accelkit env -r GPU=1)" to apply it to this shell; in scripts, '
            'out=$(accelkit env -r GPU=1) && eval "$out". In a SLURM TaskProlog, print '
            "--format taskprolog: the same lines with values unquoted, as SLURM reads them."
        ),
        epilog=(
            "Exit status: 0 on success; 1 when the request does not fit; 2 when it is malformed "
            "or could never fit on this node (the message says what the node has), or when "
            "--ledger or ACCELKIT_LEDGER names no place for a ledger (a relative path, a "
            "directory), as run refuses it; a ledger that cannot be read (corrupt, another "
            "node's) or an ACCELKIT_GRANT that names no grant is a note on stderr, and the "
            "environment is printed all the same. On failure "
            "stdout holds the line `false`, so an eval of it fails as well; with --json it "
            "holds nothing, as for every --json verb (the error is on stderr)."
        ),
    )
    add_request_options(parser, "request")
    add_override_option(parser, "as `accelkit ls` does")
    parser.add_argument(
        "--no-hints",
        action="store_true",
        help="leave out plugins' advisory variables (e.g. framework memory fractions)",
    )
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="shell",
        help=(
            "shell (default): lines for eval, values shell-quoted; taskprolog: lines for a SLURM "
            "TaskProlog's output, values verbatim (SLURM does not unquote them); json: the "
            "grant, its ids and its env"
        ),
    )
    parser.add_argument(
        "--json", action="store_const", dest="format", const="json", help="--format json"
    )
    add_ledger_option(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Grant the request on a fresh allocator and print the grant's environment."""
    from accelkit._stdout import stdout_aside
    from accelkit.node._detect import detect_node
    from accelkit.schedule._allocator import Allocator

    with stdout_aside():  # eval runs stdout: what plugins print there goes to stderr
        request, accelerator_type = parse_request(args.request)
        _check_ledger_path(args)
        host = host_from_args(args)
        node = detect_node(host, dict(args.override) or None)
        say_exclusion_warnings("env", node)
        grant = Allocator(node).acquire(request, accelerator_type=accelerator_type)
        if grant is None:
            print(f"accelkit env: {request} does not fit on this node now", file=sys.stderr)
            return EXIT_FAILED
        hidden = (  # no -r at all is no request, not a request for no device
            hidden_families(args.hide_others, grant, request, node)
            if args.request
            else args.hide_others
        )
        env = grant.env(hide_others=hidden, hooks=not args.no_hints)
        if not grant.devices:
            told = _nothing_granted(request, accelerator_type, env, args)
            print(f"accelkit env: {told}", file=sys.stderr)
        else:
            _say_held(args, host, grant)
    left = left_alone(grant.families)
    if left:
        print(f"accelkit env: {left_alone_text(left, 'this shell')}", file=sys.stderr)
    if args.format == "json":
        print_json({"grant": grant.to_dict(), "ids": grant.ids, "env": env})
    elif args.format == "taskprolog":
        sys.stdout.write(taskprolog_lines(env))
    else:
        sys.stdout.write(shell_lines(env))
    return EXIT_OK


def _check_ledger_path(args: argparse.Namespace) -> None:
    """Refuse, as ``run`` and ``ps`` do, a ledger path no ledger can be at: ``--ledger``, or
    else (where no ``ACCELKIT_GRANT`` names the ledger) ``ACCELKIT_LEDGER``, that is relative
    (each working directory would have its own), empty, or names a directory. Bad usage, not a
    note beside the exports: ``eval`` would run on with a shell that no ``run`` of this ledger
    meets. What only the ledger's content can tell (corrupt, another node's, an
    ``ACCELKIT_GRANT`` that names no grant) stays a note: the environment is right either way."""
    from accelkit.ledger._location import GRANT_VAR, location_of

    if args.ledger is not None or not os.environ.get(GRANT_VAR, "").strip():
        location_of(args.ledger)


def _say_held(args: argparse.Namespace, host: Host, grant: Grant) -> None:
    """One stderr line when the node's ledger holds a device of ``grant``: the shell would share
    it with its holder. A ledger that cannot be read is said too, never an error: the
    environment is right either way."""
    from accelkit.errors import AccelkitError

    try:
        ledger = open_ledger(args, host=host, overrides=dict(args.override) or None)
        holdings = ledger.holding(device for device, _share in grant.devices)
    except (AccelkitError, OSError) as error:
        print(f"accelkit env: cannot check the node's ledger: {describe(error)}", file=sys.stderr)
        return
    if holdings:
        shared = shared_resources(ledger.node.devices)
        held = "; ".join(  # the devices both name, not the rest of the holder's grant
            f"{devices_text(named, shared)} by {process_text(h.holder)}" for h, named in holdings
        )
        print(
            f"accelkit env: the ledger {ledger.path} holds devices this environment names "
            f"({held}); accelkit env takes nothing from it: accelkit run takes devices that "
            "no one holds",
            file=sys.stderr,
        )


def _nothing_granted(
    request: Mapping[str, object],
    accelerator_type: Optional[str],
    env: Mapping[str, object],
    args: argparse.Namespace,
) -> str:
    """What an env verb that grants no device did, in a sentence (stderr: eval never sees it);
    with ``--json`` it prints the grant all the same, and says what its ``env`` holds."""
    asked = ", ".join(f"{name}={value}" for name, value in request.items())
    if accelerator_type is not None:
        asked = ", ".join(filter(None, [asked, f"{TYPE_OPTION}={accelerator_type}"]))
    what = f"the request ({asked})" if asked else "no request (-r RES=Q)"
    why = "--hide-others" if args.hide_others else "a request for no device, as in accelkit run"
    hide = f"{len(env)} variable(s) that hide the node's devices ({why})"
    keep = "this shell keeps the devices it sees"
    if args.format == "json" and env:
        done = f"printing the grant, its env holding {hide}"
    elif args.format == "json":
        done = f"printing the grant, its env empty: {keep}"
    elif env:
        done = f"printing {hide}"
    else:
        done = f"printing nothing: {keep}"
    return f"{what} takes no device; {done}"


def parse_request(items: Sequence[str]) -> tuple[dict[str, Quantity], Optional[str]]:
    """``["GPU=0.5", "accelerator_type=H100"]`` -> ``({"GPU": 0.5}, "H100")``."""
    request: dict[str, Quantity] = {}
    accelerator_type: Optional[str] = None
    for item in items:
        name, text = resource_text(item)
        if name in request or (name == TYPE_OPTION and accelerator_type is not None):
            raise ValueError(f"{item!r}: {name} is requested twice; give each resource once")
        if name == TYPE_OPTION:
            accelerator_type = text
        else:
            request[name] = resource_quantity(item)[1]
    return request, accelerator_type


def shell_lines(env: dict[str, Optional[str]]) -> str:
    """``export VAR=value`` (shell-quoted) and ``unset VAR`` lines, one per variable.

    A name that is not a shell variable name raises ``ValueError`` rather than printing a line
    that ``eval`` would run as something else.
    """
    _check_names(env)
    return "".join(
        f"unset {name}\n" if value is None else f"export {name}={shlex.quote(value)}\n"
        for name, value in env.items()
    )


def taskprolog_lines(env: dict[str, Optional[str]]) -> str:
    """``export VAR=value`` and ``unset VAR`` lines as SLURM reads a TaskProlog's output.

    slurmstepd (``task.c``, ``_proc_stdout``) sets the variable to the rest of the line after
    ``=``, verbatim: a shell-quoted ``''`` would reach the task as two quote characters. So the
    value is written as it is, and one holding a newline (which would end it early and make its
    rest a line of its own) raises ``ValueError``, as a name that is not a variable name does.
    """
    _check_names(env)
    split = [name for name, value in env.items() if value is not None and "\n" in value]
    if split:
        raise ValueError(
            f"cannot print {split!r} as TaskProlog lines: a value holds a newline, which SLURM "
            "reads as the end of the value; use --json"
        )
    return "".join(
        f"unset {name}\n" if value is None else f"export {name}={value}\n"
        for name, value in env.items()
    )


def _check_names(env: Mapping[str, Optional[str]]) -> None:
    """``ValueError`` for a name that is not a shell variable name, rather than a line that
    ``eval`` or SLURM would read as something else."""
    bad = [name for name in env if not re.fullmatch(_SHELL_NAME, name)]
    if bad:
        raise ValueError(f"cannot print {bad!r} as shell variables; use --json")
