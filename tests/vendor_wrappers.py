"""What the tests know about the vendors' real Python wrappers they fetch (see conftest)."""

from __future__ import annotations

import pathlib
from typing import Callable

Fetch = Callable[[str, str], pathlib.Path]
AMDSMI_LATEST = "7.0.2"
"""amdsmi is not installed in the test environment: ``import ray`` (a test dependency) crashes
with ``KeyError: 'libamd_smi.so'`` where amdsmi is installed without ROCm, as here. The amdsmi
releases the tests run are fetched into the pytest cache instead (:func:`fetch_release`)."""
