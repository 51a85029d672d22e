"""What several verbs share: choosing the host, printing JSON."""

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
