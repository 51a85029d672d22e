"""Scheduling on one node: requests checked, devices allocated with packing, grants, and the
environment that makes a worker see its grant.
"""

from __future__ import annotations

from accelkit._lazy import lazy_exports

TYPE_CHECKING = False

_LAZY = {
    "validate_request": "_request",
    "Allocator": "_allocator",
    "Grant": "_grant",
    "apply_env": "_worker_env",
    "worker_environ": "_worker_env",
    "NOSET_PREFIX": "_worker_env",
    "LOCAL_DEVICES_PREFIX": "_worker_env",
}

__all__ = list(_LAZY)

if TYPE_CHECKING:
    from accelkit.schedule._allocator import Allocator as Allocator
    from accelkit.schedule._grant import Grant as Grant
    from accelkit.schedule._request import validate_request as validate_request
    from accelkit.schedule._worker_env import LOCAL_DEVICES_PREFIX as LOCAL_DEVICES_PREFIX
    from accelkit.schedule._worker_env import NOSET_PREFIX as NOSET_PREFIX
    from accelkit.schedule._worker_env import apply_env as apply_env
    from accelkit.schedule._worker_env import worker_environ as worker_environ

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
