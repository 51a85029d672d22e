"""A stand-in for ``libcuda`` that answers as the real H100 did.

``accelkit verify`` loads it in its child process when ``ACCELKIT_VERIFY_CUDA_LIBRARY`` names this
file, and calls it as it calls the real driver: ``cuInit(0)``, ``cuDeviceGetCount``, ``cuDeviceGet``
and ``cuDeviceGetUuid_v2``, with ``ctypes`` pointers for the out values. The answers come from the
table of what the driver showed a fresh process under each ``CUDA_VISIBLE_DEVICES`` value
(``tests/plugins/data/h100-cuda-visible-devices.json``, named by ``FAKE_LIBCUDA_TABLE``): the
status of ``cuInit`` and the device count; the one GPU's UUID is the table's. A value the H100
was never run under is an error, so a test cannot pass on a guess.

``FAKE_LIBCUDA_LIE`` makes it answer as a broken setup would, for the tests that ``verify`` says
so: ``count=N`` for another count, ``uuid=GPU-...`` for another GPU. Standard library only: the
child process that imports it runs with ``python -I -S``.
"""

from __future__ import annotations

import ctypes
import json
import os
from typing import Any

with open(os.environ["FAKE_LIBCUDA_TABLE"], encoding="utf-8") as _file:
    _TABLE = json.load(_file)
_ROWS = {row["CUDA_VISIBLE_DEVICES"]: row for row in _TABLE["rows"]}
_LIE = dict(
    item.split("=", 1) for item in os.environ.get("FAKE_LIBCUDA_LIE", "").split(";") if item
)
SUCCESS = 0
NOT_INITIALIZED = 3


def _row() -> dict[str, Any]:
    value = os.environ.get("CUDA_VISIBLE_DEVICES")
    if value not in _ROWS:
        raise LookupError(f"the H100 was never run under CUDA_VISIBLE_DEVICES={value!r}")
    row: dict[str, Any] = _ROWS[value]
    return row


def cuInit(flags: int) -> int:  # the driver's names
    status: int = _row()["cuInit"]
    return status


def cuDeviceGetCount(count: Any) -> int:
    if _row()["cuInit"] != SUCCESS:
        return NOT_INITIALIZED
    count.contents.value = int(_LIE.get("count", _row()["cuda_device_count"]))
    return SUCCESS


def cuDeviceGet(device: Any, ordinal: int) -> int:
    device.contents.value = ordinal
    return SUCCESS


def cuDeviceGetUuid_v2(uuid: Any, device: int) -> int:
    text = _LIE.get("uuid", _TABLE["gpu_uuid"])
    raw = bytes.fromhex(text.split("-", 1)[1].replace("-", ""))
    ctypes.memmove(uuid, raw, len(raw))
    return SUCCESS
