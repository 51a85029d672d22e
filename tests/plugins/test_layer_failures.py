"""Every failure kind, on every detection layer of every built-in plugin, as one table.

Each family is described once as a *stack*: its healthy vendor library, recorded command outputs
and file tree (from each plugin's ``testing`` module and the kit's fake libraries), and its
layers in order. A row of the table breaks one layer in one way, removes the layers before it
and keeps the layers after it healthy. The rule under test (issue 3): a missing library or
command, a non-zero exit, a timeout, garbage output, an unreadable or binary file each gives the
next layer or, on the last layer, zero devices with a diagnostic; never an exception, never a
hang (an unreadable file is a FIFO here, which a plain ``open().read()`` would block on for
ever).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Optional, Union

import accelkit
import pytest
from accelkit.diagnostics import Diagnostic, collecting
from accelkit.host import FakeHost, ProbeEnv
from accelkit.host._base import ProbeFunction
from accelkit.manager import AcceleratorManager
from accelkit.testing import fakes
from accelkit_plugins.amd import testing as amd
from accelkit_plugins.ascend import testing as ascend
from accelkit_plugins.gaudi import testing as gaudi
from accelkit_plugins.intel import testing as intel
from accelkit_plugins.neuron import testing as neuron
from accelkit_plugins.nvidia import testing as nvidia
from accelkit_plugins.tpu import testing as tpu

GIB = 1 << 30
Argv = tuple[str, ...]


@dataclass(frozen=True)
class Library:
    """A vendor library layer: ``name`` is imported (in-process or in a probe); ``starts`` is the
    attribute path of the call that opens it, ``lists`` the one that lists devices."""

    name: str
    starts: str
    lists: str
    probe: bool = False


@dataclass(frozen=True)
class Command:
    """A command layer: the argv prefixes it runs (every spelling of its flags)."""

    argvs: tuple[Argv, ...]


@dataclass(frozen=True)
class Files:
    """A file layer: ``absent`` are the directories that make it have nothing to say;
    ``reads`` the files (a glob under the root) whose content it needs."""

    absent: tuple[str, ...]
    reads: Optional[str] = None


Layer = Union[Library, Command, Files]


@dataclass
class Stack:
    """One family's healthy node: what each layer reads, and the layers in order."""

    manager: AcceleratorManager
    ids: list[str]
    modules: Callable[[], dict[str, Any]]
    commands: dict[Argv, Any]
    files: Callable[[Path], None]
    layers: list[tuple[str, Layer]]
    # Layers whose broken files still let them answer, with what (see the rows' comments).
    recovers: dict[tuple[int, str], list[str]] = field(default_factory=dict)


def _nvidia() -> Stack:
    gpus = fakes.fake_gpus(2)

    def files(root: Path) -> None:
        nvidia.write_proc(root, gpus)
        nvidia.write_sysfs(root, gpus)

    return Stack(
        accelkit.get_manager("nvidia"),
        ["0", "1"],
        lambda: {"pynvml": fakes.fake_pynvml(gpus)},
        {nvidia.NVIDIA_SMI_ARGV: (0, nvidia.nvidia_smi_output(gpus))},
        files,
        [
            ("library", Library("pynvml", "nvmlInit", "nvmlDeviceGetCount")),
            ("command", Command((nvidia.NVIDIA_SMI_ARGV,))),
            ("sysfs", Files(("proc/driver/nvidia",), "proc/driver/nvidia/gpus/*/information")),
        ],
    )


def _amd() -> Stack:
    gpus = fakes.fake_amdgpus(2)
    return Stack(
        accelkit.get_manager("amd"),
        ["0", "1"],
        lambda: {"amdsmi": fakes.fake_amdsmi(gpus)},
        {
            amd.AMD_SMI_LIST_ARGV: (0, amd.amd_smi_list_output(gpus)),
            amd.AMD_SMI_STATIC_ARGV: (0, amd.amd_smi_static_output(gpus)),
        },
        lambda root: amd.write_sysfs(root, gpus),
        [
            ("library", Library("amdsmi", "amdsmi_init", "amdsmi_get_processor_handles")),
            ("command", Command((amd.AMD_SMI_LIST_ARGV,))),
            ("sysfs", Files(("sys/class/kfd",), "sys/class/kfd/kfd/topology/nodes/*/properties")),
            ("sysfs", Files(("sys/class/drm",), "sys/bus/pci/devices/*/vendor")),
        ],
    )


def _intel() -> Stack:
    cards = intel.fake_cards(2)  # one Max 1550: two stacks, two root devices
    roots = [("Intel(R) Data Center GPU Max 1550", 64 * GIB)] * 2
    return Stack(
        accelkit.get_manager("intel"),
        ["0", "1"],
        lambda: {"dpctl": intel.fake_dpctl(roots)},
        {intel.XPU_SMI_ARGV: (0, intel.xpu_smi_output(cards))},
        lambda root: intel.write_sysfs(root, cards),
        [
            ("library", Library("dpctl", "get_devices", "get_devices", probe=True)),
            ("command", Command((intel.XPU_SMI_ARGV,))),
            ("sysfs", Files(("sys/class/drm",), "sys/bus/pci/devices/*/vendor")),
        ],
    )


def _neuron() -> Stack:
    rejected = (2, "", "neuron-ls: error: unrecognized arguments: --output-format json\n")
    return Stack(
        accelkit.get_manager("neuron"),
        ["0", "1"],
        dict,
        {neuron.NEW_FLAG: rejected, neuron.OLD_FLAG: (0, neuron.neuron_ls_json([2]))},
        lambda root: neuron.write_sysfs(root, [2]),
        [
            ("command", Command((neuron.NEW_FLAG, neuron.OLD_FLAG))),
            ("sysfs", Files((neuron.SYSFS,), f"{neuron.SYSFS}/*/core_count")),
        ],
        # Without a readable core_count, the driver's neuron_core<N> directories still count.
        recovers={(1, kind): ["0", "1"] for kind in ("binary", "garbage", "unreadable")},
    )


def _tpu() -> Stack:
    def files(root: Path) -> None:
        tpu.write_pci_function(root, tpu.GVNIC_BUS_ID, 0x1AE0, 0x0042, 0x020000)
        tpu.write_chips(root, 2)

    return Stack(
        accelkit.get_manager("tpu"),
        ["0", "1"],
        dict,
        {},
        files,
        [
            ("devfs", Files(("dev",))),  # reads no file of its own: the PCI facts below
            ("sysfs", Files((), "sys/devices/pci0000:00/*/vendor")),
        ],
    )


def _gaudi() -> Stack:
    cards = gaudi.fake_cards(2)
    return Stack(
        accelkit.get_manager("gaudi"),
        ["0", "1"],
        dict,
        {gaudi.HL_SMI_ARGV: (0, gaudi.hl_smi_output(cards))},
        lambda root: gaudi.write_sysfs(root, cards),
        [
            ("command", Command((gaudi.HL_SMI_ARGV,))),
            ("sysfs", Files(("sys/class/accel",), "sys/devices/*/*/module_id")),
        ],
    )


def _ascend() -> Stack:
    npus = [ascend.FakeNpu(0), ascend.FakeNpu(1)]
    return Stack(
        accelkit.get_manager("ascend"),
        ["0", "1"],
        lambda: {"acl": ascend.fake_acl(2)},
        {
            ascend.CHIP_MAP_ARGV: (0, ascend.chip_map_output(npus)),
            ascend.CARD_LIST_ARGV: (0, ascend.card_list_output(npus)),
        },
        lambda root: ascend.write_devfs(root, [0, 1]),
        [
            ("library", Library("acl", "init", "rt.get_device_count", probe=True)),
            ("command", Command((ascend.CHIP_MAP_ARGV,))),
            ("command", Command((ascend.CARD_LIST_ARGV,))),
            ("devfs", Files(("dev",))),  # counts file names; it reads no content
        ],
    )


STACKS: dict[str, Callable[[], Stack]] = {
    "nvidia": _nvidia,
    "amd": _amd,
    "intel": _intel,
    "neuron": _neuron,
    "tpu": _tpu,
    "gaudi": _gaudi,
    "ascend": _ascend,
}

BINARY = b"\x00\xff\xfe\x01garbage\x00\n"
COMMAND_FAILURES: dict[str, Any] = {
    "missing": None,  # not installed: FileNotFoundError
    "exit-1": (1, "", "failed to initialize: driver/library version mismatch\n"),
    "timeout": TimeoutError("ran past its 10 s budget"),
    "garbage": (0, "Segmentation fault (core dumped)\n, , ,\n{[\n"),
    "binary": (0, BINARY.decode("latin-1")),
    "empty": (0, ""),
}
LIBRARY_FAILURES = ("missing", "import-error", "start-fails", "garbage")
PROBE_FAILURES = ("timeout", "probe-garbage")
FILE_FAILURES = ("binary", "garbage", "unreadable")


def _rows() -> list[Any]:
    rows = []
    for family, build in STACKS.items():
        for position, (_, layer) in enumerate(build().layers):
            if isinstance(layer, Library):
                kinds: Sequence[str] = LIBRARY_FAILURES + (PROBE_FAILURES if layer.probe else ())
            elif isinstance(layer, Command):
                kinds = tuple(COMMAND_FAILURES)
            else:
                kinds = (
                    *(("absent",) if layer.absent else ()),
                    *(FILE_FAILURES * bool(layer.reads)),
                )
            for kind in kinds:
                rows.append(pytest.param(family, position, kind, id=f"{family}-{position}-{kind}"))
    return rows


class ProbeAnswers(FakeHost):
    """A FakeHost whose library probes all return ``answer``: a probe process that printed
    something unexpected."""

    def __init__(self, answer: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.answer = answer

    def probe(
        self,
        function: ProbeFunction,
        *args: Any,
        timeout: Optional[float] = None,
        env: Optional[ProbeEnv] = None,
    ) -> Any:
        return self.answer


def _break_module(module: ModuleType, path: str, replacement: Callable[..., Any]) -> None:
    *parents, name = path.split(".")
    owner: Any = module
    for parent in parents:
        owner = getattr(owner, parent)
    setattr(owner, name, replacement)


def _raise(*_: Any, **__: Any) -> Any:
    raise RuntimeError("driver not loaded")


def _corrupt(root: Path, pattern: str, kind: str) -> None:
    paths = sorted(root.glob(pattern))
    assert paths, f"the fake tree has no {pattern}"
    for path in paths:
        path.unlink()
        if kind == "binary":
            path.write_bytes(BINARY)
        elif kind == "garbage":
            path.write_text("zz not a value ::\n")
        else:
            os.mkfifo(path)  # open(path).read() would wait for a writer for ever


def _host(stack: Stack, position: int, kind: str, root: Path) -> FakeHost:
    stack.files(root)
    modules, commands = stack.modules(), dict(stack.commands)
    answer: Any = None
    for earlier, (_, layer) in enumerate(stack.layers[: position + 1]):
        broken = earlier == position
        if isinstance(layer, Library):
            if not broken or kind == "missing":
                modules.pop(layer.name)
            elif kind == "import-error":
                modules[layer.name] = ImportError(f"lib{layer.name}.so: cannot open shared object")
            elif kind == "timeout":
                modules[layer.name] = TimeoutError("the probe ran past its 20 s budget")
            elif kind == "start-fails":
                _break_module(modules[layer.name], layer.starts, _raise)
            elif kind == "garbage":
                _break_module(modules[layer.name], layer.lists, lambda *_: "lots")
            else:
                answer = {"count": "lots", "soc": 7} if layer.name == "acl" else "lots"
        elif isinstance(layer, Command):
            for argv in layer.argvs:
                commands.pop(argv)
                failure = COMMAND_FAILURES[kind] if broken else None
                if failure is not None:
                    commands[argv] = failure
        elif not broken or kind == "absent":
            for directory in layer.absent:
                shutil.rmtree(root / directory)
        else:
            assert layer.reads is not None
            _corrupt(root, layer.reads, kind)
    options: dict[str, Any] = {"root": root, "commands": commands, "modules": modules}
    return FakeHost(**options) if answer is None else ProbeAnswers(answer, **options)


def _text(notes: Sequence[Diagnostic]) -> str:
    return "\n".join(f"{note.level}: {note.message}" for note in notes)


@pytest.mark.parametrize("family", STACKS)
def test_a_healthy_stack_answers_from_its_first_layer(family: str, tmp_path: Path) -> None:
    stack = STACKS[family]()
    stack.files(tmp_path)
    host = FakeHost(root=tmp_path, commands=stack.commands, modules=stack.modules())
    devices = stack.manager.detect(host)
    assert [d.id for d in devices] == stack.ids
    assert {d.source for d in devices} == {stack.layers[0][0]}


@pytest.mark.parametrize(("family", "position", "kind"), _rows())
def test_a_broken_layer_gives_the_next_layer_or_no_devices_with_a_reason(
    family: str, position: int, kind: str, tmp_path: Path
) -> None:
    stack = STACKS[family]()
    host = _host(stack, position, kind, tmp_path)
    with collecting(family) as notes:
        devices = stack.manager.detect(host)  # never raises, never hangs
    text = _text(notes)
    assert all(isinstance(d, accelkit.Device) for d in devices)
    if position + 1 < len(stack.layers):
        source = stack.layers[position + 1][0]
        assert [(d.id, d.source) for d in devices] == [(i, source) for i in stack.ids], text
        assert f"{len(stack.ids)} device(s) from the {source} layer" in text
    else:
        expected = stack.recovers.get((position, kind), [])
        assert [d.id for d in devices] == expected, text
    if kind != "absent":  # the broken layer said why it did not answer
        assert any(note.level in ("warning", "error") for note in notes) or (
            "not installed" in text
        ), text
    messages = [note.message for note in notes]
    assert len(messages) == len(set(messages)), f"a diagnostic is repeated:\n{text}"


def test_the_table_covers_every_failure_kind_of_every_family() -> None:
    kinds: dict[str, set[str]] = {family: set() for family in STACKS}
    for row in _rows():
        family, _, kind = row.values
        kinds[family].add(kind)
    command_kinds = {f for f, seen in kinds.items() if set(COMMAND_FAILURES) <= seen}
    assert command_kinds == set(STACKS) - {"tpu"}  # TPU has no vendor command
    file_kinds = {f for f, seen in kinds.items() if set(FILE_FAILURES) <= seen}
    assert file_kinds == {"nvidia", "amd", "intel", "neuron", "tpu", "gaudi"}  # not Ascend's
    library_families = {f for f, seen in kinds.items() if "import-error" in seen}
    assert library_families == {"nvidia", "amd", "intel", "ascend"}
