"""A deliberately broken accelkit plugin: each ``BROKEN:`` comment is a rule it violates.

It loads (its declarations pass the registry's contract checks) and detects devices on its own
fake hosts, so the conformance kit can run every check on it; each rule broken here makes a
different check fail, with a message that names the problem and the line. Do not copy anything
from here.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Mapping, Sequence
from typing import Optional

# BROKEN: a heavy framework imported at module level, which every scheduler would pay for.
import pytest  # noqa: F401
from accelkit import AcceleratorManager, Device, Host, hookimpl

__all__ = ["BrokenManager", "accelkit_register_managers"]


class BrokenManager(AcceleratorManager):
    """The ``broken`` family, resource ``BRK``, variable ``BROKEN_VISIBLE_DEVICES``."""

    name = "broken"
    resource_name = "BRK"
    # BROKEN: declares contract version 2, yet its visibility_env below defaults ``total`` to 0
    # (a host without devices) instead of None (unknown).
    api_version = 2
    visible_devices_env_var = "BROKEN_VISIBLE_DEVICES"

    def detect(self, host: Host) -> list[Device]:
        # BROKEN: reads the process environment instead of host.env.
        verbose = os.environ.get("BROKEN_DEBUG")
        # BROKEN: reads a variable that env_vars_read does not declare.
        mode = host.env.get("BROKEN_MODE", "")
        # BROKEN: looks at the machine directly, and hides the failure, instead of using host.
        with contextlib.suppress(OSError):
            os.listdir("/dev")
        # BROKEN: asks a server on the network.
        with contextlib.suppress(OSError):
            socket.getaddrinfo("metadata.broken.internal", 80)
        # BROKEN: raises when its tool is missing or hangs, instead of noting it and returning [].
        host.run(["brk-smi", "--version"])
        # BROKEN: a probe function that a real host's probe process cannot import.
        host.probe(lambda import_module: verbose or mode)
        # BROKEN: the same id for every device, and a type label with spaces.
        return [
            Device(id="1", index=n, type_label="Broken Model 1")
            for n, _ in enumerate(host.glob("/dev/brk*"))
        ]

    def read_visible(self, env: Mapping[str, str]) -> Optional[list[str]]:
        # BROKEN: ignores the variable, so a restricted process looks unrestricted.
        return None

    def visibility_env(
        self, ids: Sequence[str], *, total: Optional[int] = 0
    ) -> dict[str, Optional[str]]:
        # BROKEN: writes whitespace, and a different set of ids than it was given.
        return {"BROKEN_VISIBLE_DEVICES": ", ".join(reversed(list(ids))) + " "}


@hookimpl
def accelkit_register_managers() -> list[AcceleratorManager]:
    """The broken family."""
    return [BrokenManager()]
