"""Hygiene: importing a plugin is cheap, because every scheduler imports every plugin at start.

"Cheap" is a module denylist checked in a fresh interpreter, never a timing.
"""

from __future__ import annotations

from collections.abc import Sequence

from accelkit.errors import ProbeError
from accelkit.host import LocalHost
from accelkit.testing._audit import VENDOR_LIBRARIES
from accelkit.testing._catalog import check
from accelkit.testing._imports import new_modules
from accelkit.testing._packaging_checks import entries_for
from accelkit.testing._subject import Subject

HEAVY_MODULES = VENDOR_LIBRARIES | frozenset(
    {
        "numpy",
        "pandas",
        "ray",
        "dask",
        "distributed",
        "intel_extension_for_pytorch",
        "keras",
        "mindspore",
        "paddle",
        "onnxruntime",
        "tensorrt",
        "triton",
        "cuda",
        "pycuda",
        "pyopencl",
        "openvino",
        "neuronxcc",
        "libneuronxla",
        "pytest",
    }
)
"""Frameworks and vendor runtimes a plugin must import lazily (through the Host), if at all; the
check adds the plugin's own vendor libraries (``Subject.vendor_libraries``)."""

IMPORT_TIMEOUT = 60.0


def imported_by(modules: Sequence[str]) -> list[str]:
    """Top-level modules a fresh interpreter gains by importing ``modules`` (with our sys.path)."""
    shown = " and ".join(modules)
    try:
        added = LocalHost().probe(new_modules, list(modules), timeout=IMPORT_TIMEOUT)
    except (ImportError, ProbeError, TimeoutError) as exc:
        raise AssertionError(f"importing {shown} in a fresh interpreter failed: {exc}") from None
    return sorted({name.partition(".")[0] for name in added})


@check("hygiene")
def import_is_light(subject: Subject) -> None:
    """Importing the plugin pulls in no framework or vendor runtime (a module denylist)."""
    modules = [type(subject.manager).__module__]
    modules += [e.module for e in entries_for(subject.manager) if e.module not in modules]
    denied = HEAVY_MODULES.union(subject.vendor_libraries)
    heavy = sorted(denied.intersection(imported_by(modules)))
    assert not heavy, (
        f"importing {' and '.join(modules)} imports {heavy}; every scheduler imports every "
        "plugin at start, so import vendor libraries inside detect() through "
        "host.import_module, and frameworks not at all"
    )
