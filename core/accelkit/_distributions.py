"""The one ``importlib.metadata`` accelkit reads: the stdlib's from Python 3.10, else the backport.

Every reader of entry points (the loader, the conformance kit, the host-builder lookup) imports
it from here, so they always agree: once imported, the backport replaces the stdlib's finder,
and two readers with different choices would see different distributions.
"""

from __future__ import annotations

import sys

if sys.version_info >= (3, 10):
    from importlib import metadata
else:
    import importlib_metadata as metadata  # type: ignore[import-not-found, unused-ignore]

__all__ = ["metadata"]
