"""A deliberately broken accelkit plugin: each ``BROKEN:`` comment is a rule it violates.

It loads (its declarations pass ``contract_errors()``), so the conformance kit can run it and
must fail with messages naming each problem. Do not copy anything from here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Optional

from accelkit import AcceleratorManager, Device, Host, hookimpl

__all__ = ["BrokenManager", "accelkit_register_managers"]


class BrokenManager(AcceleratorManager):
    """The ``broken`` family, resource ``BRK``, variable ``BROKEN_VISIBLE_DEVICES``."""

    name = "broken"
    resource_name = "BRK"
    visible_devices_env_var = "BROKEN_VISIBLE_DEVICES"

    def detect(self, host: Host) -> list[Device]:
        # BROKEN: looks at the machine directly instead of through ``host``.
        os.listdir("/dev")
        if os.environ.get("BROKEN_FAIL"):
            # BROKEN: raises for a broken vendor stack instead of noting it and returning [].
            raise RuntimeError("broken vendor stack")
        # BROKEN: the same devices whatever the host has; duplicate ids, out of index order.
        return [Device(id="1", index=1), Device(id="1", index=0)]

    def read_visible(self, env: Mapping[str, str]) -> Optional[list[str]]:
        # BROKEN: ignores the variable, so a restricted process looks unrestricted.
        return None

    def visibility_env(self, ids: Sequence[str]) -> dict[str, Optional[str]]:
        # BROKEN: writes whitespace, and a different set of ids than it was given.
        return {"BROKEN_VISIBLE_DEVICES": ", ".join(reversed(list(ids))) + " "}

    def validate_quantity(self, quantity: object) -> int:
        # BROKEN: accepts anything (negative, NaN, strings) as one device.
        return 10_000


@hookimpl
def accelkit_register_managers() -> list[AcceleratorManager]:
    """The broken family."""
    return [BrokenManager()]
