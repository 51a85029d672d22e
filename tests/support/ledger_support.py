"""Holders in other processes: a child takes a grant from a ledger file, prints its ids, and
holds it until told to go (or until it is killed); and the ``accelkit`` verbs run as commands on
the example H100 node."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

from accelkit import Node, detect_node, load_snapshot

ROOT = Path(__file__).resolve().parents[2]
NODES = ("nvidia-h100-8gpu", "tpu-v6e-8", "neuron-trn1-32xlarge")
H100 = str(ROOT / "examples" / "nodes" / "nvidia-h100-8gpu")


def accelkit(ledger: Path, verb: str, *argv: str) -> list[str]:
    """The command line of ``accelkit VERB --ledger LEDGER ARGV...``."""
    return [sys.executable, "-m", "accelkit.cli", verb, "--ledger", str(ledger), *argv]


def run(
    ledger: Path, *argv: str, timeout: float = 60, env: Optional[dict[str, str]] = None
) -> subprocess.CompletedProcess[str]:
    """Run a verb to its end (``env``: the whole environment, None: this one)."""
    return subprocess.run(
        accelkit(ledger, *argv), capture_output=True, text=True, timeout=timeout, env=env
    )


def start(ledger: Path, *argv: str, **options: Any) -> subprocess.Popen[str]:
    """Start a verb, its stdout and stderr piped (``options`` go to ``Popen``)."""
    return subprocess.Popen(
        accelkit(ledger, *argv),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **options,
    )


def node_of(name: str) -> Node:
    return detect_node(load_snapshot(ROOT / "examples" / "nodes" / name))


HOLD = """
import json, sys
from accelkit import Node
from accelkit.ledger._ledger import Ledger
node = Node.from_dict(json.load(open(sys.argv[2])))
ledger = Ledger(sys.argv[1], node)
request = json.loads(sys.argv[3])
wait = sys.argv[4] == "wait"
grant = ledger.acquire(request, wait=wait)
print(json.dumps(None if grant is None else grant.ids), flush=True)
sys.stdin.read()  # hold until the parent closes stdin
if sys.argv[5] == "release" and grant is not None:
    ledger.release(grant)
"""


class HoldingProcess:
    """A child process holding (or waiting for) one grant of a ledger."""

    def __init__(
        self,
        ledger: Path,
        node_file: Path,
        request: dict[str, Any],
        *,
        wait: bool = False,
        release: bool = True,
    ) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                HOLD,
                str(ledger),
                str(node_file),
                json.dumps(request),
                "wait" if wait else "now",
                "release" if release else "keep",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def ids(self) -> Any:
        """The granted ids by resource (None: it did not fit), once the child has decided."""
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, f"the holder exited with {self.process.wait()} before deciding"
        return json.loads(line)

    def finish(self) -> None:
        """Let the child release (or drop) its grant and exit."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        assert self.process.wait(timeout=30) == 0

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(timeout=30)


def hold_in_turn(
    ledger: Path, node_file: Path, requests: list[dict[str, Any]]
) -> tuple[list[HoldingProcess], list[Any]]:
    """One holding process per request, each started once the one before has its grant, so
    that the placement is deterministic."""
    holders, ids = [], []
    for request in requests:
        holders.append(HoldingProcess(ledger, node_file, request))
        ids.append(holders[-1].ids())
    return holders, ids
