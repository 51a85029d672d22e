"""The process ``accelkit verify`` starts under one grant's environment: it loads the family's
runtime library, asks how many devices the runtime shows and their UUIDs, and prints one line of
JSON.

``accelkit verify`` runs this file by path (``python -I -S _verify_child.py cuda LIBRARY...``)
and never imports it: it imports the standard library only (``ctypes``, ``json``, ``sys``), so
it starts in milliseconds, and nothing but the runtime itself acts on the environment it tests.
The runtime is asked exactly as a worker's framework would meet it: CUDA's driver API
(``cuInit(0)``, then ``cuDeviceGetCount``, ``cuDeviceGet`` and ``cuDeviceGetUuid_v2``), HIP's
``hipGetDeviceCount``. None of CUDA's calls creates a context, so asking beside running jobs
costs them nothing, and an exclusive-process GPU counts as seen.

A library named by a path ending in ``.py`` is a stand-in runtime for tests: a module with the
same functions, called with the same ``ctypes`` arguments (``ctypes.pointer`` to the out
values), so this file's calls are the ones tested.
"""

from __future__ import annotations

import ctypes
import json
import sys
from typing import Any, Callable, Optional

MAX_ASKED = 64
"""UUIDs asked for at most: a one-device grant's process should see one device, and a runtime
that answers a huge count is reported by the count, not by a billion calls."""


def load(candidates: list[str]) -> Any:
    """The first library of ``candidates`` that loads (``ctypes.CDLL``, or a stand-in module
    for a ``.py`` path); ``OSError`` naming every failure when none does."""
    failures = []
    for name in candidates:
        try:
            if name.endswith(".py"):
                return _stand_in(name)
            return ctypes.CDLL(name)
        except OSError as exc:  # the loader's message names the library; a stand-in's may not
            failures.append(str(exc) if name in str(exc) else f"{name}: {exc}")
    raise OSError("; ".join(failures) or "no library to load")


def _stand_in(path: str) -> Any:
    """The module at ``path``, imported as a stand-in runtime."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("accelkit_verify_stand_in", path)
    if spec is None or spec.loader is None:
        raise OSError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def ask_cuda(lib: Any) -> dict[str, Any]:
    """What CUDA's driver shows this process: the device count, and each device's UUID as 32
    hex digits (None where the driver does not give it)."""
    status = lib.cuInit(0)
    if status != 0:  # 100: no device visible; 101: an invalid list (an ordinal twice)
        return {"count": 0, "uuids": [], "status": f"cuInit returned {status}"}
    count = ctypes.c_int(0)
    status = lib.cuDeviceGetCount(ctypes.pointer(count))
    if status != 0:
        return {"count": 0, "uuids": [], "status": f"cuDeviceGetCount returned {status}"}
    uuids = [_cuda_uuid(lib, ordinal) for ordinal in range(min(count.value, MAX_ASKED))]
    return {"count": count.value, "uuids": uuids, "status": "ok"}


def _cuda_uuid(lib: Any, ordinal: int) -> Optional[str]:
    """The UUID of CUDA's device ``ordinal`` as 32 hex digits; None when the driver has no UUID
    call or refuses. ``cuDeviceGetUuid_v2`` (CUDA 11.4) gives a MIG instance its own UUID, where
    the first version gave its GPU's."""
    get_uuid = getattr(lib, "cuDeviceGetUuid_v2", None) or getattr(lib, "cuDeviceGetUuid", None)
    device = ctypes.c_int(0)
    if get_uuid is None or lib.cuDeviceGet(ctypes.pointer(device), ordinal) != 0:
        return None
    raw = (ctypes.c_ubyte * 16)()
    if get_uuid(ctypes.pointer(raw), device.value) != 0:
        return None
    return bytes(raw).hex()


def ask_hip(lib: Any) -> dict[str, Any]:
    """What HIP shows this process: the device count (HIP's UUID bytes are encoded differently
    between ROCm releases, so only the count is asked)."""
    count = ctypes.c_int(0)
    status = lib.hipGetDeviceCount(ctypes.pointer(count))
    if status != 0:  # 100: no device visible
        return {"count": 0, "uuids": [], "status": f"hipGetDeviceCount returned {status}"}
    return {"count": count.value, "uuids": [], "status": "ok"}


ASK: dict[str, Callable[[Any], dict[str, Any]]] = {"cuda": ask_cuda, "hip": ask_hip}
"""The runtimes this process can ask, by the name ``accelkit verify`` passes."""


def main(argv: list[str]) -> int:
    """``RUNTIME LIBRARY...``: print what the runtime shows, or that no library loaded."""
    runtime, candidates = argv[0], argv[1:]
    try:
        lib = load(candidates)
    except OSError as exc:
        print(json.dumps({"loaded": False, "status": str(exc)}))
        return 0
    print(json.dumps({"loaded": True, **ASK[runtime](lib)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
