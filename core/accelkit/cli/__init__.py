"""The ``accelkit`` command: one module per verb, errors for people, no tracebacks.

Each verb module exposes ``register(subparsers, common)`` which adds its parser and sets
``run=function(args) -> int``. Exit codes: 0 success, 1 a check or detection found a problem,
2 bad usage or input.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Optional

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "describe", "main"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

VERBS = ("ls", "plugins", "env", "run", "ps", "resources", "dask-worker", "snapshot", "check")
"""Verb modules in the order ``--help`` lists them."""


def build_parser() -> argparse.ArgumentParser:
    """The parser; every verb takes ``--host DIR`` to read a snapshot instead of the machine."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--host",
        metavar="DIR",
        help="read a node snapshot directory (made by `accelkit snapshot`) instead of this machine",
    )
    parser = argparse.ArgumentParser(
        prog="accelkit",
        description=(
            "Find this node's accelerators, name them as scheduler resources, and build the "
            "environment that makes a worker see exactly the devices it was granted."
        ),
        epilog="Run `accelkit VERB --help` for each verb. No accelerator? Try "
        "`accelkit ls --host examples/nodes/nvidia-h100-8gpu`.",
    )
    from .._version import VERSION

    parser.add_argument("--version", action="version", version=f"accelkit {VERSION}")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB")
    for verb in VERBS:
        importlib.import_module(f".{verb.replace('-', '_')}", __name__).register(verbs, common)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the ``accelkit`` script; returns the exit code."""
    from ..errors import AccelkitError

    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "run", None) is None:
        parser.print_help()
        return EXIT_USAGE
    try:
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
    return code


def describe(exc: BaseException) -> str:
    """An error as a sentence: ``/x: Permission denied`` rather than ``[Errno 13] ...``."""
    if isinstance(exc, OSError) and exc.strerror and exc.filename is not None:
        return f"{exc.filename}: {exc.strerror}"
    return str(exc) or type(exc).__name__


if __name__ == "__main__":
    sys.exit(main())
