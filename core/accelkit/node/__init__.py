"""A node: the record of what one machine offers, and the named steps that detect it."""

from __future__ import annotations

from accelkit._lazy import lazy_exports

TYPE_CHECKING = False

_LAZY = {
    "Node": "_record",
    "SCHEMA_VERSION": "_record",
    "detect_node": "_detect",
    "CONFIG_ENV_VARS": "_operator",
    "DEFAULT_LABEL_PREFIX": "_resources",
    "EXCLUDE_ENV": "_operator",
    "OVERRIDE_ENV": "_operator",
    "record_snapshot": "_snapshot",
}

__all__ = list(_LAZY)

if TYPE_CHECKING:
    from accelkit.node._detect import detect_node as detect_node
    from accelkit.node._operator import CONFIG_ENV_VARS as CONFIG_ENV_VARS
    from accelkit.node._operator import EXCLUDE_ENV as EXCLUDE_ENV
    from accelkit.node._operator import OVERRIDE_ENV as OVERRIDE_ENV
    from accelkit.node._record import SCHEMA_VERSION as SCHEMA_VERSION
    from accelkit.node._record import Node as Node
    from accelkit.node._resources import DEFAULT_LABEL_PREFIX as DEFAULT_LABEL_PREFIX
    from accelkit.node._snapshot import record_snapshot as record_snapshot

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
