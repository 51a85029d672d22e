"""``accelkit snapshot DIR``: record what detection reads here, to replay it with ``--host DIR``."""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelkit.cli import EXIT_OK, describe
from accelkit.cli._common import host_from_args

if TYPE_CHECKING:
    from accelkit.node._record import Node


def register(verbs: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``snapshot`` verb."""
    parser = verbs.add_parser(
        "snapshot",
        parents=[common],
        help="record this node's accelerator view into a directory, for --host DIR",
        description=(
            "Run detection while recording every file, command output and declared variable it "
            "reads into DIR (DIR/snapshot.json and DIR/root/). Vendor libraries are not used, so "
            "the families answer from their commands and files, which the snapshot can hold. "
            "`accelkit ls --host DIR` then shows this node anywhere. With --host SRC, re-record "
            "an existing snapshot (e.g. to redact it), into another DIR or, with --force, into "
            "SRC itself (recorded beside it, then put in its place); DIR may not lie inside SRC."
        ),
        epilog="Exit status: 0 when recorded; 2 when DIR is not empty (without --force), lies "
        "inside --host SRC, or cannot be written.",
    )
    parser.add_argument("directory", metavar="DIR", help="where to write the snapshot")
    parser.add_argument(
        "--redact",
        action="store_true",
        help=(
            "replace every device UUID detection reported, and serial numbers, by stable fake "
            "ones, consistently everywhere (file paths, bus ids and host names are kept)"
        ),
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="write into a non-empty DIR, replacing a snapshot already there",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from accelkit import registry
    from accelkit.host import load_snapshot
    from accelkit.host._replay import MANIFEST, ROOT
    from accelkit.node._detect import detect_node
    from accelkit.node._snapshot import record_snapshot

    target = Path(args.directory)
    if args.host is not None and _inside_the_source(target, args.host):
        raise ValueError(
            f"{target} lies inside {args.host}, the snapshot --host replays: the recording "
            "would write into the files it reads; record into a directory outside it"
        )
    if target.exists() and not target.is_dir():
        raise NotADirectoryError(f"{target} exists and is not a directory")
    if target.is_dir() and any(target.iterdir()) and not args.force:
        raise FileExistsError(f"{target} is not empty; choose an empty directory or add --force")
    host = host_from_args(args)
    with warnings.catch_warnings():  # `accelkit plugins` explains broken plugins
        warnings.simplefilter("ignore", registry.PluginWarning)
        try:
            record_snapshot(target, host, redact=args.redact, overwrite=args.force)
        except FileExistsError:
            raise
        except OSError as exc:
            reason = exc.strerror if exc.strerror and exc.filename else describe(exc)
            raise OSError(f"cannot write a snapshot into {target}: {reason}") from None
        node = detect_node(load_snapshot(target))
    manifest = json.loads((target / MANIFEST).read_text(encoding="utf-8"))
    files = sum(1 for p in (target / ROOT).rglob("*") if p.is_symlink() or p.is_file())
    print(f"Recorded {target}{' (redacted)' if args.redact else ''}:")
    print(f"  {files} file(s) and link(s) under {target / ROOT}")
    print(f"  {len(manifest['env'])} variable(s): " + (", ".join(manifest["env"]) or "none"))
    print(f"  {len(manifest['commands'])} command(s)" + (":" if manifest["commands"] else ""))
    for command in manifest["commands"]:
        outcome = command.get("error") or f"exit {command['returncode']}"
        print(f"    {' '.join(command['argv'])}  ({outcome})")
    counts = [f"{int(node.resources[r])} {r}" for r in _resources(node)]
    print(f"Replays as: {', '.join(counts) or 'no accelerators'}. Try: accelkit ls --host {target}")
    return EXIT_OK


def _inside_the_source(target: Path, source: str) -> bool:
    """Whether ``target`` lies within the snapshot directory ``source`` (not ``source`` itself,
    which is re-recorded beside it and then replaced: see ``record_snapshot``)."""
    from accelkit.node._snapshot import lies_within

    return lies_within(target, source) and not lies_within(source, target)


def _resources(node: Node) -> list[str]:
    """The node's device resources, in device order."""
    return list(dict.fromkeys(d.resource_name for d in node.devices))
