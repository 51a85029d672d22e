"""Hygiene: importing a plugin is cheap, because every scheduler imports every plugin at start.

"Cheap" is a module denylist checked in a fresh interpreter, never a timing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence

from .audit import VENDOR_LIBRARIES
from .catalog import check
from .packaging_checks import entries_for
from .subject import Subject

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
"""Frameworks and vendor runtimes a plugin must import lazily (through the Host), if at all."""

IMPORT_TIMEOUT = 60.0

_PROBE = """
import importlib, json, sys
request = json.loads(sys.stdin.read())
sys.path[:] = request["path"]
before = set(sys.modules)
try:
    for name in request["modules"]:
        importlib.import_module(name)
except BaseException as exc:
    print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
else:
    print(json.dumps({"modules": sorted(set(sys.modules) - before)}))
"""


def imported_by(modules: Sequence[str]) -> list[str]:
    """Top-level modules a fresh interpreter gains by importing ``modules`` (with our sys.path)."""
    shown = " and ".join(modules)
    request = json.dumps({"path": sys.path, "modules": list(modules)})
    result = subprocess.run(
        [sys.executable, "-c", _PROBE],
        input=request,
        capture_output=True,
        text=True,
        timeout=IMPORT_TIMEOUT,
    )
    lines = result.stdout.strip().splitlines()
    if not lines:
        raise AssertionError(
            f"importing {shown} in a fresh interpreter died (exit {result.returncode}): "
            f"{result.stderr.strip()[-500:]}"
        )
    reply = json.loads(lines[-1])
    if "error" in reply:
        raise AssertionError(f"importing {shown} in a fresh interpreter failed: {reply['error']}")
    return sorted({name.partition(".")[0] for name in reply["modules"]})


@check("hygiene")
def import_is_light(subject: Subject) -> None:
    """Importing the plugin pulls in no framework or vendor runtime (a module denylist)."""
    modules = [type(subject.manager).__module__]
    modules += [e.module for e in entries_for(subject.manager) if e.module not in modules]
    heavy = sorted(HEAVY_MODULES.intersection(imported_by(modules)))
    assert not heavy, (
        f"importing {' and '.join(modules)} imports {heavy}; every scheduler imports every "
        "plugin at start, so import vendor libraries inside detect() through "
        "host.import_module, and frameworks not at all"
    )
