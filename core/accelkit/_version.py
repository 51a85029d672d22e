"""The version of this accelkit, in one place (pyproject.toml's ``version`` must agree)."""

from __future__ import annotations

__all__ = ["VERSION", "__version__"]

VERSION = "0.1.0"

__version__ = VERSION
"""The conventional spelling; ``accelkit.__version__`` resolves here lazily."""
