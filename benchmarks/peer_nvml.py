"""``accelkit ls --json`` beside NVML's own start-up, on a machine with NVIDIA GPUs.

Run: ``python benchmarks/peer_nvml.py [--rounds N]`` from an environment holding accelkit and
``nvidia-ml-py`` (issue 22 asks for a wheel venv: ``pip install dist/accelkit-*.whl
nvidia-ml-py``), on a machine whose NVIDIA driver answers NVML. Elsewhere it says why and exits.
Without an ``accelkit`` script beside the interpreter (accelkit on ``PYTHONPATH``), ``ls`` runs
as ``python -m accelkit.cli``.

Each round starts every command below once, in this order, as its own process; a figure is the
median over the rounds, and a ratio compares two figures of the same run:

- ``bare``: ``python -c pass``;
- ``count``: :data:`COUNT`, ``import pynvml; pynvml.nvmlInit(); pynvml.nvmlDeviceGetCount()``,
  the least any tool that asks NVML how many GPUs there are pays. Target (issue 22): ``ls
  --json`` at most 1.3x this;
- ``same facts``: :data:`SAME_FACTS`, the NVML calls ``accelkit ls`` makes and nothing else
  (per GPU a handle, then its PCI bus id, name, UUID, memory, compute mode and MIG mode, then
  ``nvmlShutdown``): NVML's own share of ``ls``;
- ``floor``: importing the standard modules and pluggy that accelkit is written with
  (``peer_ray.FLOOR``);
- ``accelkit ls --json``.

``ls`` cannot take less than the floor plus NVML's own work for the same facts (``same facts``
less ``bare``) unless it overlapped the two; what it takes beyond that sum is reported as
accelkit's own share. Where the floor alone comes near the count, the 1.3x target is out of
reach of any command written with pluggy and the standard modules it uses.

Then where the count, the same facts and ``ls --json`` spend their time, run in-process with
every NVML call timed (each the median of ``--phase-runs`` processes): for ``ls``, the time until
it begins to import ``pynvml`` (accelkit's own start-up: its modules, the plugins, discovery,
detection starting), the import, each NVML call (summed by name, in the order first made), and
what follows (the other families' detection, the report). The interpreter's own start is not in
these figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from peer_ray import FLOOR

COUNT = "import pynvml; pynvml.nvmlInit(); pynvml.nvmlDeviceGetCount()"
TARGET = 1.3

SAME_FACTS = """
import pynvml
CALLS = ("nvmlDeviceGetPciInfo", "nvmlDeviceGetName", "nvmlDeviceGetUUID",
         "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetComputeMode", "nvmlDeviceGetMigMode")
pynvml.nvmlInit()
for index in range(pynvml.nvmlDeviceGetCount()):
    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    for call in CALLS:
        try:
            getattr(pynvml, call)(handle)
        except pynvml.NVMLError:  # not supported on this GPU: ls leaves the fact empty
            pass
pynvml.nvmlShutdown()
"""
"""The NVML calls ``accelkit ls`` makes on GPUs without MIG instances, and nothing else."""

CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
"""The children write bytecode as an installed program does, so no measured run compiles."""

PHASES = """
import contextlib, importlib._bootstrap as bootstrap, io, json, sys, time
start = time.perf_counter()
calls, depth = [], [0]
find_and_load = bootstrap._find_and_load
def timed_call(name, function):
    def call(*args, **kwargs):
        depth[0] += 1
        began = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            depth[0] -= 1
            if depth[0] == 0:
                calls.append((name, began - start, time.perf_counter() - start))
    return call
def loading(name, import_):
    if name != "pynvml":
        return find_and_load(name, import_)
    began = time.perf_counter()
    module = find_and_load(name, import_)
    calls.append(("import pynvml", began - start, time.perf_counter() - start))
    for attribute in dir(module):
        if attribute.startswith("nvml") and callable(getattr(module, attribute)):
            setattr(module, attribute, timed_call(attribute, getattr(module, attribute)))
    return module
bootstrap._find_and_load = loading
RUN
print(json.dumps({"total": time.perf_counter() - start, "calls": calls}))
"""
"""A child that times ``RUN`` in-process: when ``pynvml`` was imported, and every NVML call
made from outside the module (``nvmlInit`` calls ``nvmlInitWithFlags``: one call, timed once)."""

RUN_LS = """
from accelkit.cli import script
sys.argv = ["accelkit", "ls", "--json"]
with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
    script()
"""


def wall_time(argv: list[str]) -> float:
    """Seconds from starting ``argv`` to its exit (its output discarded); it must succeed."""
    start = time.perf_counter()
    result = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=CHILD_ENV)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"{argv} failed ({result.returncode}): {result.stderr!r}")
    return elapsed


def paired(commands: dict[str, list[str]], rounds: int) -> dict[str, float]:
    """Median seconds of each command over ``rounds`` rounds that start each once, in order."""
    for argv in commands.values():  # warm the file cache and bytecode first
        wall_time(argv)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(rounds):
        for name, argv in commands.items():
            times[name].append(wall_time(argv))
    return {name: statistics.median(runs) for name, runs in times.items()}


def phases(run: str) -> dict[str, float]:
    """Seconds ``run`` spends, in-process, per phase: before importing ``pynvml``, the import,
    each NVML call (summed by name, in the order first made), after the last call, and in all."""
    script = PHASES.replace("RUN", run)
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=CHILD_ENV, check=True
    )
    data = json.loads(out.stdout.strip().splitlines()[-1])
    total: float = data["total"]
    calls: list[tuple[str, float, float]] = [tuple(call) for call in data["calls"]]
    if not calls:
        return {"in all (it never imported pynvml)": total}
    made = [name for name, _, _ in calls]
    spent = {"before importing pynvml": calls[0][1]}
    for name in dict.fromkeys(made):
        times = f" ({made.count(name)} calls)" if made.count(name) > 1 else ""
        spent[name + times] = sum(end - began for n, began, end in calls if n == name)
    spent["after the last NVML call"] = total - max(end for _, _, end in calls)
    spent["in all"] = total
    return spent


def print_phases(what: str, run: str, repeat: int) -> None:
    """:func:`phases` of ``run``, the median of ``repeat`` processes."""
    runs = [phases(run) for _ in range(repeat)]
    print(f"\n{what}, in-process (the interpreter's own start not counted), median of {repeat}:")
    for name in runs[0]:
        print(f"  {name:40}{statistics.median(r.get(name, 0.0) for r in runs) * 1e3:8.2f} ms")


def check_nvml() -> None:
    """Exit, saying why, where this machine has no NVML to measure against."""
    try:
        import pynvml
    except ImportError:
        raise SystemExit("nvidia-ml-py is not installed: pip install nvidia-ml-py") from None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        message = f"NVML did not initialise here ({exc}): this needs an NVIDIA GPU"
        raise SystemExit(message) from None
    count = pynvml.nvmlDeviceGetCount()
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
    except pynvml.NVMLError as exc:
        driver = f"unknown ({exc})"
    pynvml.nvmlShutdown()
    print(f"NVML: {count} GPU(s), driver {driver if isinstance(driver, str) else driver.decode()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21, help="paired rounds (default 21)")
    parser.add_argument(
        "--phase-runs", type=int, default=5, help="processes per phase breakdown (default 5)"
    )
    args = parser.parse_args()
    check_nvml()
    python = sys.executable
    script = shutil.which("accelkit", path=str(Path(python).parent))
    command = [script] if script else [python, "-m", "accelkit.cli"]
    figures = paired(
        {
            "bare": [python, "-c", "pass"],
            "count": [python, "-c", COUNT],
            "same facts": [python, "-c", SAME_FACTS],
            "floor": [python, "-c", FLOOR],
            "accelkit ls --json": [*command, "ls", "--json"],
        },
        args.rounds,
    )
    bare, count = figures["bare"], figures["count"]
    print(f"{args.rounds} paired rounds, medians")
    print(f"{'':22}{'ms':>8}{'/bare':>8}{'/count':>8}")
    for name, seconds in figures.items():
        print(f"{name:22}{seconds * 1e3:8.1f}{seconds / bare:8.2f}{seconds / count:8.2f}")
    ls = figures["accelkit ls --json"]
    verdict = "met" if ls / count <= TARGET else "NOT met"
    print(f"target: ls --json / count {ls / count:.2f} (at most {TARGET}): {verdict}")
    nvml_work = figures["same facts"] - bare
    own = ls - figures["floor"] - nvml_work
    print(
        f"ls --json / same facts {ls / figures['same facts']:.2f}; the floor alone is "
        f"{figures['floor'] / count:.2f}x the count; accelkit's own share (ls - floor - "
        f"(same facts - bare)): {own * 1e3:.1f} ms"
    )
    print_phases("count", COUNT, args.phase_runs)
    print_phases("same facts", SAME_FACTS, args.phase_runs)
    print_phases("accelkit ls --json", RUN_LS, args.phase_runs)


if __name__ == "__main__":
    main()
