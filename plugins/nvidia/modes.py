"""Compute modes: whether a process may use a GPU at all, and how many processes at once.

NVML's ``nvmlDeviceGetComputeMode`` and nvidia-smi's ``compute_mode`` field give the mode an
administrator set with ``nvidia-smi -c``: ``Default`` (any number of processes),
``Exclusive_Process`` (one process holds a context on the GPU at a time; a second one fails to
create its context) and ``Prohibited`` (no process may create a context). ``Exclusive_Thread``
is the mode older drivers had before ``Exclusive_Process`` replaced it; it admits one process
too. So a Prohibited GPU is not offered (``Device.offered`` False: CUDA still counts it, so a
``CUDA_VISIBLE_DEVICES`` naming it reads on past it), and an exclusive one is offered whole only
(``Device.exclusive``: no fractions, one grant at a time, never shown to a grant's peers).
A GPU whose mode cannot be read is offered as in ``Default``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional, Union

from accelkit import Device, Host, note

from .smi import reachable

__all__ = [
    "COMPUTE_MODES",
    "EXCLUSIVE",
    "PROHIBITED",
    "SMI_MODES",
    "compute_mode",
    "offered",
    "smi_modes",
]

COMPUTE_MODES = {"Default": 0, "Exclusive_Thread": 1, "Prohibited": 2, "Exclusive_Process": 3}
"""nvidia-smi's names -> NVML's ``nvmlComputeMode_t`` values (``NVML_COMPUTEMODE_*``)."""
NAMES = {value: name for name, value in COMPUTE_MODES.items()}
PROHIBITED = COMPUTE_MODES["Prohibited"]
EXCLUSIVE = (COMPUTE_MODES["Exclusive_Thread"], COMPUTE_MODES["Exclusive_Process"])


def compute_mode(value: Union[int, str, None]) -> Optional[int]:
    """NVML's mode number from NVML's answer or nvidia-smi's name; None when unknown
    (``[N/A]``, ``[Not Supported]``, a number this table does not know)."""
    if isinstance(value, str):
        return COMPUTE_MODES.get(value.strip())
    return value if value in NAMES else None


def offered(devices: Sequence[Device], mode: Optional[int], gpu: object) -> list[Device]:
    """A GPU's devices (the GPU, or its MIG instances) as its compute mode lets them be offered:
    each not ``offered`` when Prohibited, each ``exclusive`` when one process at a time may use
    the GPU."""
    if mode == PROHIBITED:
        # nvidia-smi -i takes a bus id too: this GPU's number may not be nvidia-smi's index
        bus = next((d.pci_bus_id for d in devices if d.pci_bus_id), "<index>")
        note(
            f"GPU {gpu} is in the Prohibited compute mode (no process may use it): not offered; "
            f"`nvidia-smi -i {bus} -c DEFAULT` makes it usable",
            "warning",
        )
        return [device.replace(offered=False) for device in devices]
    if mode in EXCLUSIVE:
        note(f"GPU {gpu} is in the {NAMES[mode]} compute mode: offered whole, to one grant")
        return [device.replace(exclusive=True) for device in devices]
    return list(devices)


SMI_MODES = ("nvidia-smi", "--query-gpu=index,compute_mode", "--format=csv,noheader")
"""Asked beside the documented query (whose argv snapshots already record): each GPU's mode."""
MAX_OUTPUT = 64 * 1024  # "1023, Exclusive_Process" a line: room for every GPU a node may have


def smi_modes(host: Host) -> dict[str, int]:
    """GPU index -> mode from :data:`SMI_MODES`; empty, with a note, when it gives none (every
    GPU is then offered as in Default). Asked through ``host.run`` itself: a snapshot recorded
    before this query replays it as a missing program, and ``run_command``'s "nvidia-smi is
    not installed" would misreport the nvidia-smi that has just answered."""
    try:
        result = host.run(SMI_MODES)
    except (OSError, TimeoutError) as error:
        return _no_modes(f"{type(error).__name__}: {error}")
    text = reachable(result)  # the rows of the GPUs it reaches, when it cannot reach one (smi)
    if text is None:
        return _no_modes(f"exit status {result.returncode}")
    modes: dict[str, int] = {}
    for line in text[:MAX_OUTPUT].splitlines():
        index, _, name = (cell.strip() for cell in line.partition(","))
        mode = compute_mode(name)
        if index and mode is not None:
            modes[index] = mode
    return modes


def _no_modes(why: str) -> dict[str, int]:
    """No compute modes, noted with the reason."""
    note(
        f"`{' '.join(SMI_MODES)}` gave no compute modes ({why[:160]}): every GPU is offered as "
        "in the Default mode"
    )
    return {}
