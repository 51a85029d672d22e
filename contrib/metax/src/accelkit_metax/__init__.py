"""MetaX GPUs (C500, C550, ...) for accelkit: experimental, community.

MetaX's MACA runtime takes CUDA's variable and its own: a process sees the GPUs listed (by
index) in ``MACA_VISIBLE_DEVICES`` where that is set and not empty, else in
``CUDA_VISIBLE_DEVICES``, as MetaX's PyTorch build (mcPytorch, ``torch.cuda``'s
``_parse_visible_devices``) reads them; the two set to different values leave a warning, since
which one the MACA runtime itself takes is not confirmed. A grant writes both, with the same ids
(MetaX's vLLM platform sets ``MACA_VISIBLE_DEVICES`` to ``CUDA_VISIBLE_DEVICES``'s value on every
worker). The plugin declares ``CUDA_VISIBLE_DEVICES`` as its primary variable, and accelkit's
node detection treats it as *claimed* by MetaX on a node where MetaX GPUs are detected: the
NVIDIA family makes no stand-in GPUs from it there, and a node where NVIDIA and MetaX GPUs are
both detected is refused with an error naming both claims (one ``CUDA_VISIBLE_DEVICES=0`` would
show a worker device 0 of each). GPUs take the ``GPU`` resource and may be shared by fractions,
as on Ray. Collectives use the ``nccl`` backend, which MetaX's stack serves with MCCL
(vLLM-metax: ``dist_backend = "nccl"``, its NCCL wrapper calling the ``mccl*`` functions).

Detection: MetaX's ``pymxsml`` binding in a probe process (``mxsml_extension``:
``mxSmlExInit``, ``mxSmlExDeviceGetCount``, ``mxSmlExDeviceGetHandleByIndex``,
``mxSmlExDeviceGetName``, ``...GetUUID``, ``...GetPciInfo``), else ``mx-smi -L`` (one
``GPU#<i>  <name>  <bus id>  <state> (UUID: ...)`` row per GPU). Labels are MetaX's product
names: ``MXC500``, ``MXC550``. Sources, and what is not confirmed: the package's README.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any, Callable, Optional

from accelkit import AcceleratorManager, Device, Frameworks, Host, hookimpl, note
from accelkit.detect import call_probe, decode, detect_layers, device_count, run_command, type_label

VARIABLE = "CUDA_VISIBLE_DEVICES"
MACA = "MACA_VISIBLE_DEVICES"  # MetaX's own; read first where set and not empty (mcPytorch)
LIST = ("mx-smi", "-L")
ROW = re.compile(  # GPU#<i>  <name>  [<bus id>  <state>]  [(UUID: <uuid>)]
    r"GPU\s*#?\s*(?P<index>\d+)\s*:?\s+(?P<name>.+?)"
    r"(?:\s+(?P<bus>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])(?:\s+\S.*?)?)?"
    r"(?:\s+(?:Available|Unavailable))?(?:\s*\(UUID:\s*(?P<uuid>[^)\s]+)\s*\))?\s*"
)
TYPE_LABELS = ((r"\b(?:MX)?C(\d{3}[\w-]*)", r"MXC\1"),)  # "MXC500", "MetaX C500" -> "MXC500"
UNCONFIRMED = (
    "not confirmed by MetaX's documentation: which variable the MACA runtime takes when "
    "MACA_VISIBLE_DEVICES and CUDA_VISIBLE_DEVICES differ, how it reads spaces, UUIDs or invalid "
    "tokens, and the unit of MXSML's memory figures (not used); see accelkit-metax's README"
)
DIFFER = "{} and {} differ: read as mcPytorch does; the MACA runtime's choice is not confirmed"


class MetaxManager(AcceleratorManager):
    """MetaX GPUs: ``GPU`` resources named by index in ``CUDA_VISIBLE_DEVICES``, shareable."""

    name = "metax"
    resource_name = "GPU"
    visible_devices_env_var = VARIABLE  # claimed on nodes where MetaX GPUs are detected
    env_vars_read = (VARIABLE, MACA)
    api_version = 2
    # MetaX's PyTorch builds keep torch.cuda's names, and "nccl" runs on MetaX's MCCL (vLLM-metax)
    frameworks = Frameworks(device="cuda", collective="nccl")

    def read_visible(self, env: Mapping[str, str]) -> Optional[list[str]]:
        """``MACA_VISIBLE_DEVICES`` unless unset or empty, else ``CUDA_VISIBLE_DEVICES``, as
        mcPytorch reads them (``getenv("MACA_VISIBLE_DEVICES") or getenv("CUDA_...")``); two
        variables that select differently are a warning: the runtime's own choice is unknown."""
        cuda, maca = super().read_visible(env), env.get(MACA)
        ids = cuda if maca is None else super().read_visible({VARIABLE: maca})
        if cuda is not None and cuda != ids:
            note(DIFFER.format(f"{MACA}={maca!r}", f"{VARIABLE}={env[VARIABLE]!r}"), "warning")
        return cuda if maca == "" else ids  # an empty MACA_VISIBLE_DEVICES gives way (mcPytorch)

    def visibility_env(
        self, ids: Sequence[str], *, total: Optional[int] = None
    ) -> dict[str, Optional[str]]:
        """The same ids in both variables, as MetaX's vLLM platform writes them: whichever the
        runtime reads first, the worker sees its grant."""
        return dict.fromkeys((VARIABLE, MACA), super().visibility_env(ids, total=total)[VARIABLE])

    def detect(self, host: Host) -> list[Device]:
        """MXSML (pymxsml) in a probe, else ``mx-smi -L``."""
        note(UNCONFIRMED)
        return detect_layers(host, ("library", from_mxsml), ("command", from_mx_smi))


def probe_mxsml(import_module: Callable[[str], ModuleType]) -> dict[str, Any]:
    """In the probe process: each GPU's name, UUID and bus id, as plain data; MXSML failing to
    start (no driver) is reported as ``{"absent": why}``."""
    mx: Any = import_module("pymxsml.mxsml_extension")
    try:
        mx.mxSmlExInit()
    except mx.MXSMLEXError as exc:
        return {"absent": str(exc)}
    try:
        gpus = []
        for index in range(device_count(mx.mxSmlExDeviceGetCount(), "mxSmlExDeviceGetCount")):
            handle = mx.mxSmlExDeviceGetHandleByIndex(index)
            name, uuid = mx.mxSmlExDeviceGetName(handle), mx.mxSmlExDeviceGetUUID(handle)
            bus = mx.mxSmlExDeviceGetPciInfo(handle).busId
            gpus.append({"name": decode(name), "uuid": decode(uuid), "bus": decode(bus)})
        return {"gpus": gpus}
    finally:
        mx.mxSmlExShutdown()


def from_mxsml(host: Host) -> Optional[list[Device]]:
    """MXSML numbers every MetaX GPU from 0 (CUDA_VISIBLE_DEVICES is lifted in the probe)."""
    found = call_probe(host, probe_mxsml, expect=dict, env={VARIABLE: None}, library="pymxsml")
    if found is None:
        return None
    if "absent" in found:
        note(f"MXSML did not start: {found['absent']} (no MetaX driver here)")
        return None
    return [
        Device(
            str(i),
            model=gpu["name"],
            type_label=type_label(gpu["name"], TYPE_LABELS),
            uuid=gpu["uuid"],
            pci_bus_id=gpu["bus"],
        )
        for i, gpu in enumerate(found["gpus"])
    ]


def from_mx_smi(host: Host) -> Optional[list[Device]]:
    """One GPU per ``GPU#<i>`` row of ``mx-smi -L``, in index order."""
    text = run_command(host, LIST)
    if text is None:
        return None
    rows = [ROW.fullmatch(line.strip()) for line in text.splitlines()]
    devices = [
        Device(
            str(int(row["index"])),
            model=row["name"],
            type_label=type_label(row["name"], TYPE_LABELS),
            pci_bus_id=row["bus"],
            uuid=row["uuid"],
        )
        for row in rows
        if row
    ]
    if not devices:  # a text not understood (or none) is no answer: the next layer is asked
        if text.strip():
            note(f"mx-smi -L printed no GPU#<i> row: {' '.join(text.split())[:160]}", "warning")
        return None
    return sorted(devices, key=lambda d: int(d.id))


@hookimpl
def accelkit_register_managers() -> list[AcceleratorManager]:
    """The plugin's one manager, for every scheduler that loads accelkit."""
    return [MetaxManager()]
