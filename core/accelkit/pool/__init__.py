"""``AcceleratorPool``: a ``concurrent.futures`` executor whose calls run on granted devices.

Lazy: a pool's worker process (``python -m accelkit.pool._child``) imports this package first,
and must import nothing but the standard library before its first call.
"""

from __future__ import annotations

from accelkit._lazy import lazy_exports

TYPE_CHECKING = False

_LAZY = {
    "AcceleratorPool": "_pool",
}

__all__ = list(_LAZY)

if TYPE_CHECKING:
    from accelkit.pool._pool import AcceleratorPool as AcceleratorPool

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
