"""Vendor runtime facts that tests of several stages check against, in one place."""

from __future__ import annotations

EMPTY_IS_UNSET = frozenset({"intel"})
"""Families whose runtime reads their visibility variable set to ``""`` as not set: SYCL's
``Parse_ONEAPI_DEVICE_SELECTOR`` and the unified runtime's ``urDeviceGetSelected`` accept every
device for an empty selector (intel/llvm ``device_filter.cpp``, ``ur_lib.cpp``). Every other
family reads ``""`` as nothing visible."""
