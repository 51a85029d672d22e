"""`accelkit check` (to be written)."""

from __future__ import annotations

import argparse
from typing import Any


def register(verbs: Any, common: argparse.ArgumentParser) -> None:
    verbs.add_parser("check", parents=[common], help="(not yet available)")
