"""``accelkit run``: take a grant from the node's ledger, then become the command that uses it.

The grant is recorded under this process's pid and start time, and then this process ``exec``s
the command: the holder in the ledger *is* the command, so the grant lives exactly as long as it
does, signals reach it directly, and its exit status is the command's own. A kill -9 at any
moment leaves nothing behind: before the exec the grant is not yet recorded or is this process's
own, after it the grant is the command's, and the next decision reclaims the grant of a process
that is gone.

The command's environment names its grant (``ACCELKIT_GRANT``), so an ``accelkit run`` inside it
takes a step of that grant, from its devices, as a SLURM job step takes from its allocation. A
grant of no device (``-r GPU=0``, or only an accelerator type) hides every device of the node
from the command, as Ray does for a task that asks for no GPU; beside other resources, a
resource asked for zero (``-r GPU=0 -r NPU=1``) hides the families that serve it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
from collections import Counter
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any, Union

from accelkit.cli import describe, printable
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
    process_text,
    say_exclusion_warnings,
)
from accelkit.cli._env import parse_request
from accelkit.node._operator import OVERRIDE_ENV
from accelkit.schedule._grant import grant_text, shared_resources

if TYPE_CHECKING:
    from accelkit.ledger._ledger import Ledger
    from accelkit.ledger._views import LedgerView
    from accelkit.schedule._grant import Grant

EXIT_BUSY = 75
"""The request does not fit now and ``--wait`` was not given (sysexits' EX_TEMPFAIL)."""
EXIT_TIMED_OUT = 124
"""``--wait --timeout S`` ran out before the request fit (as timeout(1) says it)."""
EXIT_CANNOT_EXECUTE = 126
EXIT_NOT_FOUND = 127
"""The command could not be run: the shell's codes. The grant is given back first."""


def register(verbs: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``run`` verb."""
    parser = verbs.add_parser(
        "run",
        parents=[common],
        help="take devices from this node's ledger and run a command on them",
        description=(
            "Take a grant from this node's ledger (shared by every accelkit run and "
            "AcceleratorPool of this user, or of the group sharing --ledger), print which "
            "devices it holds, then replace this process with CMD, run with the grant's "
            "visibility environment. The grant is CMD's until CMD ends, however it ends."
        ),
        epilog=(
            f"Exit status: CMD's own once it runs. Before that: {EXIT_BUSY} when the request "
            f"does not fit now (without --wait), {EXIT_TIMED_OUT} when --timeout runs out, "
            "2 for a malformed request or one this node can never serve, or a ledger that "
            f"cannot be used, {EXIT_NOT_FOUND} when CMD is not found and "
            f"{EXIT_CANNOT_EXECUTE} when it cannot be executed."
        ),
    )
    add_request_options(parser, "take")
    parser.add_argument(
        "--wait", action="store_true", help="wait in arrival order until the request fits"
    )
    parser.add_argument(
        "--timeout",
        type=_seconds,
        default=None,
        metavar="S",
        help="with --wait: give up after S seconds (0 or more)",
    )
    add_ledger_option(parser)
    add_override_option(parser, "as `accelkit ls` does")
    parser.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD ...")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Take the grant (waiting if asked), say what it holds, and exec the command."""
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise ValueError("give the command to run after --: accelkit run -r GPU=1 -- CMD ...")
    if not command[0]:  # exec refuses it, once the grant is taken
        raise ValueError(
            "the command's name is empty (an unset variable?): give the command to run after "
            "--: accelkit run -r GPU=1 -- CMD ..."
        )
    if not args.request:
        raise ValueError("say what to take with -r RES=Q, e.g. -r GPU=1")
    if args.timeout is not None and not args.wait:
        raise ValueError("--timeout applies to --wait: give both")
    request, accelerator_type = parse_request(args.request)
    if args.wait:
        _warn_if_not_found(command[0])
    ledger = open_ledger(args, host=host_from_args(args), overrides=dict(args.override) or None)
    say_exclusion_warnings("run", ledger.node)
    grant = ledger.acquire(
        request,
        wait=args.wait,
        timeout=args.timeout,
        accelerator_type=accelerator_type,
        on_wait=lambda view: _say(
            f"waiting for {', '.join(args.request)}: {_waits_for(view, ledger)}"
        ),
    )
    if grant is None:
        wants = ", ".join(args.request)
        if args.wait:
            _say(f"{wants} did not fit within {args.timeout:g} s; gave up")
            return EXIT_TIMED_OUT
        held = _waits_for(ledger.view(), ledger)
        _say(f"{wants} does not fit now ({held}); use --wait to queue")
        return EXIT_BUSY
    hidden = hidden_families(args.hide_others, grant, request, ledger.node)
    return _exec(command, grant, ledger, hidden, dict(args.override))


def _exec(
    command: list[str],
    grant: Grant,
    ledger: Ledger,
    hidden: Union[bool, frozenset[str]],
    overrides: Mapping[str, Quantity],
) -> int:
    """Become ``command`` with the grant's environment; give the grant back if that fails.

    ``--override`` goes to the command as the node's configuration (in
    ``ACCELKIT_OVERRIDE_RESOURCES``, beside what that held): an ``accelkit run`` inside it then
    detects the node this run took from, and takes a step of its grant, rather than meeting
    "another node" in the ledger."""
    from accelkit.schedule._worker_env import worker_environ

    environ = worker_environ(ledger.env(grant, hide_others=hidden))
    if overrides:
        given = {name: q if isinstance(q, int) else float(q) for name, q in overrides.items()}
        environ[OVERRIDE_ENV] = json.dumps({**_inherited_overrides(), **given})
    _say(f"took {_took(grant, ledger, hidden)}")
    sys.stdout.flush()
    ignored = _stop_ignoring(PYTHON_IGNORES)
    try:
        os.execvpe(command[0], command, environ)
    except (OSError, ValueError) as error:  # ValueError: a NUL in an argument or variable
        _ignore(ignored)
        ledger.discard(grant)
        reason = error.strerror if isinstance(error, OSError) else describe(error)
        _say(f"cannot run {command[0]!r}: {reason}")
        return EXIT_NOT_FOUND if isinstance(error, FileNotFoundError) else EXIT_CANNOT_EXECUTE


def _inherited_overrides() -> dict[str, object]:
    """The operator's ``ACCELKIT_OVERRIDE_RESOURCES`` this run read (valid: detection did)."""
    raw = os.environ.get(OVERRIDE_ENV, "")
    return dict(json.loads(raw)) if raw.strip() else {}


PYTHON_IGNORES = ("SIGPIPE", "SIGXFZ", "SIGXFSZ")
"""The signals Python ignores at start (those this system has). An ignored signal stays ignored
across ``exec``, so the command would not end by SIGPIPE when its reader goes (``yes | head``
would fail with EPIPE, and a ``pipefail`` script see status 1 for 141): they go back to their
default first, as ``subprocess`` does with ``restore_signals``."""


def _stop_ignoring(names: tuple[str, ...]) -> list[signal.Signals]:
    """Give each ignored signal of ``names`` its default action; the ones that were ignored."""
    found = (getattr(signal, name, None) for name in names)
    ignored = [s for s in found if s is not None and signal.getsignal(s) == signal.SIG_IGN]
    for number in ignored:
        signal.signal(number, signal.SIG_DFL)
    return ignored


def _ignore(signals: list[signal.Signals]) -> None:
    """Ignore ``signals`` again, when the command could not be run and this process goes on."""
    for number in signals:
        signal.signal(number, signal.SIG_IGN)


def _warn_if_not_found(program: str) -> None:
    """Before a wait, say that the command cannot be run from this shell's ``PATH``, so that a
    misspelt one is not found out only once the devices are free. A warning, not a refusal:
    the grant's environment (a site plugin's ``worker_env``) may put it on ``PATH``."""
    import shutil

    if shutil.which(program) is None:
        _say(
            f"warning: {program!r} is not an executable on PATH; waiting anyway (the grant's "
            "environment may provide it), or stop now and fix the command"
        )


def _took(grant: Grant, ledger: Ledger, hidden: Union[bool, frozenset[str]]) -> str:
    """``GPU 3``, ``GPU 1, a step of grant 41``, ``NPU 0 (the command sees no device of: ...)``
    or ``no device (the command sees none ...)``, and what the families
    ``ACCELKIT_NOSET_<FAMILY>`` leaves alone show the command."""
    granted = set(grant.ids_by_family())
    hides: Collection[str] = grant.families if hidden is True else hidden or ()
    asked = [f for f in grant.families if f in granted or f in hides]
    left = left_alone(asked)
    unseen = [f for f in asked if f not in granted and f not in left]
    if grant.devices:
        what = grant_text(grant, shared_resources(ledger.node.devices))
        if unseen:
            what += f" (the command sees no device of: {', '.join(unseen)})"
    elif unseen:
        what = f"no device (the command sees none of this node's: {', '.join(unseen)})"
    else:
        what = "no device" if left else "no device (this node has none)"
    if ledger.enclosing is not None:
        what += f", a step of grant {ledger.enclosing}"
    return f"{what}; {left_alone_text(left, 'the command')}" if left else what


def _waits_for(view: LedgerView, ledger: Ledger) -> str:
    """The holders, and the requests that came first (in this request's scope)."""
    ahead = "".join(
        f"; before it, {process_text(w.holder)} waits for {printable(w.wants)}"
        for w in view.waiting
        if w.parent == ledger.enclosing
    )
    return printable(_holders_text(view, ledger) + ahead)  # what others' grants hold, too


def _holders_text(view: LedgerView, ledger: Ledger) -> str:
    """``GPU 0 (0.5) held by pid 41 (sh)``: what holds the devices this request takes from. For
    a request of the node, its grants (a step takes from its grant's share, so only the grant is
    listed, with its steps counted); for a step, the other steps of its grant."""
    grants = [h for h in view.holdings if h.parent == ledger.enclosing]
    if not grants:
        return "nothing is held" if ledger.enclosing is None else "no other step is held"
    shared = shared_resources(ledger.node.devices)
    steps = Counter(h.parent for h in view.holdings if h.parent is not None)
    return "; ".join(
        f"{grant_text(h.grant, shared)} held by {process_text(h.holder)}"
        + _steps_text(steps[h.grant.token])
        for h in grants
    )


def _steps_text(count: int) -> str:
    """`` (2 steps inside)`` after a grant that has steps, else nothing."""
    return f" ({count} step{'s' if count > 1 else ''} inside)" if count else ""


def _say(message: str) -> None:
    print(f"accelkit run: {message}", file=sys.stderr, flush=True)


def _seconds(text: str) -> float:
    """``--timeout S`` for argparse: seconds, 0 or more (0: the request fits at once or not),
    and a usage error that says which rule ``text`` broke."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if math.isnan(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds (e.g. 30 or 0.5)")
    if value < 0:
        raise argparse.ArgumentTypeError(
            f"{text!r} is negative: give the seconds to wait, 0 or more (e.g. 30 or 0.5)"
        )
    return value
