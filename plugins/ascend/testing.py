"""Fake Huawei Ascend hosts: ``npu-smi`` text, ``/dev/davinci<N>`` files and a fake pyACL.

The default node is an Atlas 800T A2 (eight Ascend 910B3 cards, one chip and one MCU each); an
Atlas 300I Duo is ``FakeNpu(n, chips=2, chip_name="Ascend 310P3")``.

``make_host`` is this family's backdoor for the conformance kit, declared in the entry-point
group ``accelkit.testing`` (in accelkit's ``pyproject.toml``) as a third-party plugin declares
its own.
"""

from __future__ import annotations

import pathlib
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType, SimpleNamespace
from typing import Optional

from accelkit import FakeHost

__all__ = [
    "CARD_LIST_ARGV",
    "CHIP_MAP_ARGV",
    "FakeNpu",
    "card_list_output",
    "chip_map_output",
    "fake_acl",
    "make_host",
    "write_devfs",
]

CHIP_MAP_ARGV = ("npu-smi", "info", "-m")
CARD_LIST_ARGV = ("npu-smi", "info", "-l")
_WIDTH = 31  # npu-smi pads every column but the last to 31 characters
_SUPPORT_FILES = ("davinci_manager", "devmm_svm", "hisi_hdc")


@dataclass(frozen=True)
class FakeNpu:
    """One Ascend card (npu-smi's "NPU ID") with its compute chips and, usually, an MCU."""

    npu_id: int
    chips: int = 1
    chip_name: str = "Ascend 910B3"
    mcu: bool = True


def chip_map_output(npus: Sequence[FakeNpu]) -> str:
    """``npu-smi info -m``: compute chips take logic ids 0, 1, ... in order; MCUs get "-"."""
    lines = [("NPU ID", "Chip ID", "Chip Logic ID", "Chip Name")]
    logic = 0
    for npu in npus:
        for chip in range(npu.chips):
            lines.append((str(npu.npu_id), str(chip), str(logic), npu.chip_name))
            logic += 1
        if npu.mcu:
            lines.append((str(npu.npu_id), str(npu.chips), "-", "Mcu"))
    return "".join(
        "\t" + "".join(cell.ljust(_WIDTH) for cell in cells[:-1]) + cells[-1] + "\n"
        for cells in lines
    )


def card_list_output(npus: Sequence[FakeNpu]) -> str:
    """``npu-smi info -l``: the card count, then each card's NPU ID and Chip Count."""
    lines = [("Total Count", str(len(npus))), None]
    for npu in npus:
        lines += [("NPU ID", str(npu.npu_id)), ("Chip Count", str(npu.chips)), None]
    return "".join(f"\t{line[0].ljust(_WIDTH)}: {line[1]}\n" if line else "\n" for line in lines)


def write_devfs(root: pathlib.Path, physical_ids: Sequence[int]) -> None:
    """``/dev/davinci<N>`` per chip plus the driver's support files, which are not chips."""
    dev = root / "dev"
    dev.mkdir(parents=True, exist_ok=True)
    for name in (*(f"davinci{n}" for n in physical_ids), *_SUPPORT_FILES):
        (dev / name).touch()


def fake_acl(count: int, soc: Optional[str] = "Ascend910B3", error: int = 0) -> ModuleType:
    """A stand-in for pyACL's ``acl`` module: ``get_device_count`` returns ``(count, error)``."""
    module = ModuleType("acl")
    module.init = lambda: 0  # type: ignore[attr-defined]
    module.finalize = lambda: 0  # type: ignore[attr-defined]
    module.get_soc_name = lambda: soc  # type: ignore[attr-defined]
    module.rt = SimpleNamespace(get_device_count=lambda: (count, error))  # type: ignore[attr-defined]
    return module


def make_host(count: int, root: pathlib.Path) -> FakeHost:
    """A host on which the Ascend manager detects ``count`` 910B3 NPUs (npu-smi and /dev agree)."""
    npus = [FakeNpu(n) for n in range(count)]
    if not npus:
        return FakeHost(root=root)
    write_devfs(root, range(count))
    return FakeHost(
        root=root,
        commands={
            CHIP_MAP_ARGV: (0, chip_map_output(npus)),
            CARD_LIST_ARGV: (0, card_list_output(npus)),
        },
    )
