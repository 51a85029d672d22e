"""Fake MetaX hosts, for tests and for ``accelkit check metax`` (group ``accelkit.testing``).

``mx-smi -L`` prints one row per GPU, ``GPU#<i>  <name>  <bus id>  <state> (UUID: GPU-...)``,
the shape the mx-smi readers cited in the README parse. ``fake_mxsml`` stands in for
``pymxsml.mxsml_extension``: every call before ``mxSmlExInit`` fails, as MXSML's do, and
``init_error`` makes ``mxSmlExInit`` raise (a machine without the MetaX driver).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, Optional

from accelkit import FakeHost

__all__ = ["LIST_ARGV", "MODEL", "fake_mxsml", "make_host", "mx_smi_list"]

LIST_ARGV = ("mx-smi", "-L")
MODEL = "MXC500"
BUS_IDS = [f"0000:{bus:02x}:00.0" for bus in (0x0F, 0x10, 0x34, 0x35, 0x87, 0x88, 0xAE, 0xAF)]


def uuid_of(index: int) -> str:
    """A stable UUID for GPU ``index``."""
    return f"GPU-5e0c7a31-6c2d-4f5e-9a0b-{index:012x}"


def mx_smi_list(count: int, model: str = MODEL) -> str:
    """What ``mx-smi -L`` prints for ``count`` GPUs."""
    rows = [
        f"GPU#{i}  {model}  {BUS_IDS[i % len(BUS_IDS)]}  Available (UUID: {uuid_of(i)})\n"
        for i in range(count)
    ]
    return "mx-smi  version: 2.2.3\n\n" + "".join(rows)


def make_host(count: int, root: Path) -> FakeHost:
    """A host with ``count`` MetaX C500 GPUs, as ``mx-smi -L`` lists them."""
    return FakeHost(root=root, commands={LIST_ARGV: (0, mx_smi_list(count))})


class MXSMLEXError(Exception):
    """MXSML's error, carrying its return code."""


def fake_mxsml(count: int, model: str = MODEL, init_error: Optional[int] = None) -> Any:
    """A stand-in for ``pymxsml.mxsml_extension`` with ``count`` GPUs; ``calls`` counts init and
    shutdown."""
    state = {"started": False}
    calls = {"mxSmlExInit": 0, "mxSmlExShutdown": 0}

    def started() -> None:
        """Refuse a call before ``mxSmlExInit``, as MXSML does."""
        if not state["started"]:
            raise MXSMLEXError(1)  # MXSMLEX_ERROR_UNINITIALIZED

    def init() -> None:
        """``mxSmlExInit``: starts MXSML, or raises ``init_error``."""
        calls["mxSmlExInit"] += 1
        if init_error is not None:
            raise MXSMLEXError(init_error)
        state["started"] = True

    def shutdown() -> None:
        """``mxSmlExShutdown``."""
        started()
        calls["mxSmlExShutdown"] += 1
        state["started"] = False

    def handle(index: int) -> int:
        """``mxSmlExDeviceGetHandleByIndex``: the index stands for the handle."""
        started()
        return index

    def device_count() -> int:
        """``mxSmlExDeviceGetCount``."""
        started()
        return count

    return SimpleNamespace(
        MXSMLEXError=MXSMLEXError,
        calls=calls,
        mxSmlExInit=init,
        mxSmlExShutdown=shutdown,
        mxSmlExDeviceGetCount=device_count,
        mxSmlExDeviceGetHandleByIndex=handle,
        mxSmlExDeviceGetName=lambda h: model.encode(),  # bytes, as older bindings return
        mxSmlExDeviceGetUUID=lambda h: uuid_of(h),
        mxSmlExDeviceGetPciInfo=lambda h: SimpleNamespace(busId=BUS_IDS[h].encode()),
    )
