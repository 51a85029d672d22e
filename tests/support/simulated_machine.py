"""A machine with accelerators, for running tests on one where the real machine has none.

Tests must not depend on what the machine happens to have, and CI's machines have no
accelerator, so a test that only ever ran there could assume there is none. This writes one into
a directory: NVIDIA GPUs answered by the real ``pynvml`` over the emulated ``libnvidia-ml`` (a
``pynvml`` module first on ``PYTHONPATH``), and the vendor commands of AMD, Intel, Neuron, Gaudi
and Ascend on ``PATH``, each replaying what an example node recorded. A process started with
:func:`simulated_machine`'s variables detects them as it would on such a machine (a TPU needs
device files under ``/dev`` and is left out).
"""

from __future__ import annotations

import importlib.util
import json
import os
import stat
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NODES = ROOT / "examples" / "nodes"

REPLAYED = {
    "amd-smi": "amd-mi300x-8gpu",
    "xpu-smi": "intel-max1550-4gpu",
    "neuron-ls": "neuron-trn1-32xlarge",
    "hl-smi": "gaudi2-8",
    "npu-smi": "ascend-910b-8",
}
"""Each vendor command on the machine -> the example node whose recorded answers it gives."""

REPLAY = """\
#!{python}
# {program} as the example node {node} answered it (tests/support/simulated_machine.py).
import json
import sys

with open({recorded!r}, encoding="utf-8") as file:
    RECORDED = json.load(file)
for command in RECORDED:
    if command["argv"][1:] == sys.argv[1:]:
        sys.stdout.write(command["stdout"] or "")
        sys.stderr.write(command["stderr"] or "")
        sys.exit(command["returncode"])
sys.exit(f"{program}: {{sys.argv[1:]}} was not recorded on {node}")
"""

PYNVML = """\
# The real pynvml ({source}) over an emulated libnvidia-ml with {gpus} GPU(s).
import sys

from accelkit.testing import fake_gpus
from accelkit.testing.fakes.nvml_c import emulated_pynvml

emulated = emulated_pynvml(fake_gpus({gpus}), source={source!r})
for value in vars(emulated).values():  # its errors pickle as pynvml's, as the real ones do
    if isinstance(value, type) and value.__module__ == emulated.__name__:
        value.__module__ = __name__
emulated.__name__ = __name__
sys.modules[__name__] = emulated
"""


def simulated_machine(directory: Path, nvidia_gpus: int = 1) -> dict[str, str]:
    """Write the machine under ``directory``; return the ``PATH`` and ``PYTHONPATH`` a process
    runs on it with (the current ones behind the machine's own)."""
    source = importlib.util.find_spec("pynvml")
    if source is None or source.origin is None:
        raise ImportError("the simulated machine needs nvidia-ml-py, the real pynvml")
    directory = directory.resolve()  # a relative PATH entry would move with the working directory
    commands, library = directory / "bin", directory / "site"
    commands.mkdir(parents=True)
    library.mkdir()
    for program, node in REPLAYED.items():
        _write_replay(commands, program, node)
    (library / "pynvml.py").write_text(PYNVML.format(source=source.origin, gpus=nvidia_gpus))
    return {
        "PATH": os.pathsep.join([str(commands), os.environ.get("PATH", os.defpath)]),
        "PYTHONPATH": os.pathsep.join(
            [str(library), *filter(None, [os.environ.get("PYTHONPATH")])]
        ),
    }


def _write_replay(commands: Path, program: str, node: str) -> None:
    """``commands/program``: an executable answering the commands ``node`` recorded for it."""
    snapshot = json.loads((NODES / node / "snapshot.json").read_text(encoding="utf-8"))
    recorded = commands / f"{program}.json"
    answers = [
        {key: command.get(key) for key in ("argv", "stdout", "stderr", "returncode")}
        for command in snapshot["commands"]
        if command["argv"][0] == program
    ]
    recorded.write_text(json.dumps(answers), encoding="utf-8")
    script = commands / program
    script.write_text(
        REPLAY.format(python=sys.executable, program=program, node=node, recorded=str(recorded))
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
