"""The ``accelkit`` command: one module per verb, errors for people, no tracebacks.

Each verb module exposes ``register(subparsers, common)`` which adds its parser and sets
``run=function(args) -> int``. Exit codes: 0 success, 1 a check or detection found a problem,
2 bad usage or input. A verb whose output is meant for ``eval`` declares ``FAILURE_LINE``: on any
failure (bad usage included) that line goes to stdout, so ``eval "$(accelkit VERB ...)"`` fails
too instead of running on with the shell's own devices; not with ``--json``: a ``--json`` verb
that fails leaves stdout empty. Error messages show the input with its
control characters escaped (``\n``, ``\x1b``): a message is one line, and never drives the
terminal.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
import unicodedata
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, Optional, Union

__all__ = [
    "COMMAND_GC_THRESHOLDS",
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_USAGE",
    "describe",
    "main",
    "printable",
    "script",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

VERBS = (
    "ls",
    "plugins",
    "env",
    "run",
    "ps",
    "resources",
    "dask-worker",
    "snapshot",
    "check",
    "verify",
)
"""Verb modules in the order ``--help`` lists them."""


def build_parser(verb: Optional[str] = None) -> argparse.ArgumentParser:
    """The parser; every verb takes ``--host DIR`` to read a snapshot instead of the machine.

    With ``verb`` (one of :data:`VERBS`), only that verb's module is imported and registered:
    a run of one verb never pays for the others' imports. Without, every verb is there (the
    overview ``--help`` and usage errors list them all).
    """
    common = _Parser(add_help=False)
    common.add_argument(
        "--host",
        type=_snapshot_directory,
        metavar="DIR",
        help="read a node snapshot directory (made by `accelkit snapshot`) instead of this "
        "machine, with its recorded vendor variables; only ACCELKIT_* ones come from this shell",
    )
    parser = _Parser(
        prog="accelkit",
        description=(
            "Find this node's accelerators, name them as scheduler resources, and build the "
            "environment that makes a worker see exactly the devices it was granted."
        ),
        epilog="Run `accelkit VERB --help` for each verb. No accelerator? Try "
        "`accelkit ls --host examples/nodes/nvidia-h100-8gpu`.",
    )
    from accelkit._version import VERSION

    parser.add_argument("--version", action="version", version=f"accelkit {VERSION}")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=_Parser)
    for name in (verb,) if verb in VERBS else VERBS:
        _verb_module(name).register(verbs, common)
    return parser


def _snapshot_directory(text: str) -> str:
    """``--host DIR`` for argparse: an empty DIR is a usage error. ``--host "$SNAP"`` with the
    variable unset gives one, and read as no ``--host`` it would report this machine as the
    snapshot's node."""
    if not text.strip():
        raise argparse.ArgumentTypeError(
            f"{text!r} names no directory (an unset variable?): give the directory of a snapshot "
            "made by `accelkit snapshot`, or leave --host out to read this machine"
        )
    return text


def _verb_module(verb: str) -> Any:
    """The module of ``verb`` (``dask-worker`` is ``accelkit.cli._dask_worker``)."""
    return importlib.import_module(f"._{verb.replace('-', '_')}", __name__)


class _Parser(argparse.ArgumentParser):
    """argparse, with the offending words of a usage error shown escaped (see :func:`printable`),
    and :class:`_Formatter` as its help formatter."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        super().error(printable(message))


class _Formatter(argparse.HelpFormatter):
    """argparse's help formatter, sized without :mod:`shutil`.

    argparse makes a formatter for every ``add_argument`` (to check its metavar), and its own
    asks ``shutil.get_terminal_size``: importing ``shutil`` (with ``zlib``, ``bz2`` and ``lzma``)
    cost every run about 2 ms, for a width only ``--help`` and usage errors use. This reads the
    width as ``shutil`` does: ``$COLUMNS``, else the terminal of stdout, else 80 columns.
    """

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=_terminal_columns() - 2)


def _terminal_columns() -> int:
    """``shutil.get_terminal_size().columns``, without importing :mod:`shutil`."""
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    if columns <= 0 and sys.__stdout__ is not None:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns if columns > 0 else 80


COMMAND_GC_THRESHOLDS = (100_000, 50, 100)
"""The ``accelkit`` command's ``gc.set_threshold``: young objects are collected once per 100,000
allocations, not 700."""


def script() -> NoReturn:
    """The ``accelkit`` command (and ``python -m accelkit``): :func:`main`, then exit.

    A command makes most of its objects at start (modules, classes, plugins) and keeps them
    until it ends, so the garbage collector's young-object passes, every 700 allocations by
    default, walk them again and again: about 3 ms of ``accelkit ls``. The command collects once
    per :data:`COMMAND_GC_THRESHOLDS` allocations instead (mypy does the same), which still
    bounds the garbage of a verb that runs long (``dask-worker``). At the end the process frees
    its memory whole, while the interpreter's teardown would walk every object once more in a
    last collection, about 8 ms: the objects are frozen out of it (``gc.freeze``); destructors,
    ``atexit`` handlers and the final flushes run as before. :func:`main` leaves the collector
    alone, for callers that go on running.
    """
    gc.set_threshold(*COMMAND_GC_THRESHOLDS)
    code = main()
    gc.freeze()
    sys.exit(code)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The command's work: run the verb ``argv`` names (default: ``sys.argv[1:]``) and return
    the exit code."""
    words = sys.argv[1:] if argv is None else list(argv)
    failure_line = _failure_line(words)
    try:
        code, args = _run_verb(words)
    except SystemExit as stop:  # argparse: bad usage, or --help / --version
        if stop.code not in (0, None) and not _asks_json(words):
            sys.stdout.write(failure_line)
        raise
    if code != EXIT_OK and not _prints_json(args):
        sys.stdout.write(failure_line)
    return code


def _run_verb(words: list[str]) -> tuple[int, argparse.Namespace]:
    """Parse and run one verb; every failure is a one-line message and an exit code."""
    parser = build_parser(_verb(words))
    args = parser.parse_args(words)
    if getattr(args, "run", None) is None:
        parser.print_help()
        return EXIT_USAGE, args
    return _run_parsed(args), args


def _run_parsed(args: argparse.Namespace) -> int:
    """Run the verb ``args`` were parsed for."""
    from accelkit.errors import AccelkitError

    try:
        with warnings.catch_warnings():
            warnings.showwarning = _one_line_warning(args.verb)
            code: int = args.run(args)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader stopped early (`accelkit plugins --json | head`): not an error of ours.
        # Point stdout at devnull so the interpreter's final flush does not complain either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except (AccelkitError, ValueError, OSError) as exc:
        print(f"accelkit {args.verb}: error: {describe(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug of ours or a plugin's: a sentence, never a traceback
        print(
            f"accelkit {args.verb}: internal error: {type(exc).__name__}: {describe(exc)} "
            "(please report it; ACCELKIT_TRACE_PLUGINS=1 shows plugin calls)",
            file=sys.stderr,
        )
        return EXIT_FAILED
    return code


def _one_line_warning(verb: str) -> Callable[..., None]:
    """A ``warnings.showwarning`` that writes ``accelkit VERB: warning: MESSAGE`` on stderr: one
    line, like the verbs' errors, not Python's file, line number and source line."""

    def show(message: Union[Warning, str], *_where: object, **_more: object) -> None:
        print(f"accelkit {verb}: warning: {printable(str(message))}", file=sys.stderr)

    return show


def _failure_line(words: Sequence[str]) -> str:
    """The verb's ``FAILURE_LINE`` (with a newline), or nothing; the verb is the first word
    that is not an option (the top-level parser takes no option with a value). JSON output is
    never followed by it: the caller leaves it out when the verb was asked for JSON."""
    verb = _verb(words)
    if verb is None:
        return ""
    line = getattr(_verb_module(verb), "FAILURE_LINE", None)
    return f"{line}\n" if line else ""


def _prints_json(args: argparse.Namespace) -> bool:
    """Whether the parsed verb prints JSON (``--json``, or the format the last ``--format``
    chose, as argparse reads abbreviations and repeats)."""
    return getattr(args, "json", False) is True or getattr(args, "format", None) == "json"


def _asks_json(words: Sequence[str]) -> bool:
    """Whether a command line that did not parse asked for JSON: ``--json``, ``--format json``
    or ``--format=json`` (what was meant is all there is to go by)."""
    pairs = zip(words, [*words[1:], ""])
    return "--json" in words or "--format=json" in words or ("--format", "json") in pairs


def _verb(words: Sequence[str]) -> Optional[str]:
    """The verb a command line runs: its first word that is not an option (the top-level
    parser takes no option with a value), when that is a verb."""
    first = next((word for word in words if not word.startswith("-")), None)
    return first if first in VERBS else None


def describe(exc: BaseException) -> str:
    """An error as a sentence: ``/x: Permission denied`` rather than ``[Errno 13] ...``."""
    if isinstance(exc, OSError) and exc.strerror and exc.filename is not None:
        return printable(f"{exc.filename}: {exc.strerror}")
    return printable(str(exc) or type(exc).__name__)


def printable(text: str) -> str:
    """``text`` with control and format characters (newlines, escapes, NUL, bidi overrides,
    line separators, lone surrogates) written as ``\\n``, ``\\x1b``, ``\\u202e``: what a
    terminal shows, one line, and nothing it would act on."""
    return "".join(
        ch.encode("unicode_escape").decode("ascii") if unicodedata.category(ch) in UNSHOWN else ch
        for ch in text
    )


UNSHOWN = ("Cc", "Cf", "Cs", "Zl", "Zp")
"""Unicode categories :func:`printable` escapes."""


if __name__ == "__main__":
    sys.exit(main())
