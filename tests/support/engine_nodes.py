"""The example nodes the engine tests run on: the built-ins' snapshots and the example
plugin's node (a family no engine has heard of)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOTS = ROOT / "examples" / "nodes"
ACME_NODE = ROOT / "examples" / "accelkit-example" / "node"
NODES = [*sorted(SNAPSHOTS.iterdir()), ACME_NODE]
