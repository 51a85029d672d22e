"""Ledger throughput and ``accelkit run`` start-up cost.

Run: ``python benchmarks/ledger.py [--pairs N] [--runs R]``.

- Ledger pairs/s: ``release(acquire({"GPU": 1}))`` through a :class:`~accelkit.ledger.Ledger` on
  the example H100 node, from 1 process and from 8 processes at once (each its own ``Ledger``,
  all on one file; the figure is every process's pairs over the wall time). Measured in two
  places: a tmpfs directory (``$XDG_RUNTIME_DIR`` when set, else ``/dev/shm``: where the default
  ledger lives on a systemd machine) and the temp directory (the default's fallback when
  ``XDG_RUNTIME_DIR`` is unset), with each one's file system printed. The peer is the same
  pairs on one in-memory ``Allocator``. Target: at least 2,000 pairs/s from 1 process.
- ``accelkit run -r GPU=1 -- true`` (on the example node, with its own ledger): median wall time
  of whole processes, as a ratio to a bare ``python -c pass`` measured in the same run, both
  with compiled bytecode cached as an installed package has it. Target: at most 3x.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from accelkit import Allocator, Node, detect_node, load_snapshot
from accelkit.ledger import Ledger

NODE_DIR = Path(__file__).resolve().parents[1] / "examples" / "nodes" / "nvidia-h100-8gpu"
REQUEST = {"GPU": 1}
PROCESSES = 8


def pairs(ledger: Ledger, count: int) -> None:
    for _ in range(count):
        grant = ledger.acquire(REQUEST)
        assert grant is not None, "the benchmark's node is full"
        ledger.release(grant)


def one_process(path: Path, node: Node, count: int) -> float:
    ledger = Ledger(path, node)
    pairs(ledger, 50)  # warm up: allocator built, plans cached, files exist
    start = time.perf_counter()
    pairs(ledger, count)
    return count / (time.perf_counter() - start)


def _child(path: Path, node: Node, count: int, ready: object, go: object) -> None:
    ledger = Ledger(path, node)
    pairs(ledger, 20)
    ready.release()  # type: ignore[attr-defined]
    go.wait()  # type: ignore[attr-defined]
    pairs(ledger, count)


def many_processes(path: Path, node: Node, count: int) -> float:
    context = multiprocessing.get_context("fork")
    ready, go = context.Semaphore(0), context.Event()
    share = count // PROCESSES
    children = [
        context.Process(target=_child, args=(path, node, share, ready, go))
        for _ in range(PROCESSES)
    ]
    for child in children:
        child.start()
    for _ in children:
        ready.acquire()
    start = time.perf_counter()
    go.set()
    for child in children:
        child.join()
        assert child.exitcode == 0, f"a benchmark process failed ({child.exitcode})"
    return share * PROCESSES / (time.perf_counter() - start)


def in_memory(node: Node, count: int) -> float:
    allocator = Allocator(node)
    start = time.perf_counter()
    for _ in range(count):
        allocator.release(allocator.acquire(REQUEST))  # type: ignore[arg-type]
    return count / (time.perf_counter() - start)


def file_system(path: Path) -> str:
    """The type of the file system holding ``path`` (longest mount point that contains it)."""
    best, kind = "", "?"
    try:
        with open("/proc/mounts") as mounts:
            for line in mounts:
                fields = line.split()
                point = fields[1]
                inside = str(path).startswith(point.rstrip("/") + "/") or str(path) == point
                if inside and len(point) > len(best):
                    best, kind = point, fields[2]
    except OSError:
        pass
    return kind


def wall_times(argv: list[str], runs: int, env: dict[str, str]) -> list[float]:
    """Whole-process wall times, after two warm-up runs (bytecode and page caches)."""
    times = []
    for _ in range(runs + 2):
        start = time.perf_counter()
        subprocess.run(
            argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
        )
        times.append(time.perf_counter() - start)
    return times[2:]


def with_bytecode_cache(folder: str) -> dict[str, str]:
    """This environment, with compiled bytecode kept (in ``folder``) as an installed package
    has it, even where ``PYTHONDONTWRITEBYTECODE`` is set."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = folder
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=4000, help="pairs per measurement")
    parser.add_argument("--runs", type=int, default=20, help="process starts per command")
    args = parser.parse_args()
    node = detect_node(load_snapshot(NODE_DIR))
    tmpfs = os.environ.get("XDG_RUNTIME_DIR") or "/dev/shm"
    print(f"in-memory Allocator (peer): {in_memory(node, args.pairs):10,.0f} pairs/s")
    for place in dict.fromkeys([tmpfs, tempfile.gettempdir()]):
        if not os.path.isdir(place):
            continue
        with tempfile.TemporaryDirectory(dir=place) as folder:
            path = Path(folder) / "ledger.json"
            single = one_process(path, node, args.pairs)
            several = many_processes(path, node, args.pairs)
        print(
            f"ledger in {place} ({file_system(Path(folder))}): {single:8,.0f} pairs/s from 1 "
            f"process, {several:8,.0f} pairs/s from {PROCESSES} processes"
        )
    with tempfile.TemporaryDirectory() as folder:
        env = with_bytecode_cache(folder)
        ledger = str(Path(folder) / "ledger.json")
        run = [sys.executable, "-m", "accelkit.cli", "run", "-r", "GPU=1", "--host"]
        run += [str(NODE_DIR), "--ledger", ledger, "--", "true"]
        accelkit_run = statistics.median(wall_times(run, args.runs, env))
        bare = statistics.median(wall_times([sys.executable, "-c", "pass"], args.runs, env))
    print(
        f"accelkit run -r GPU=1 -- true: {accelkit_run * 1000:6.1f} ms; python -c pass: "
        f"{bare * 1000:6.1f} ms; ratio {accelkit_run / bare:4.1f}x (target: at most 3x)"
    )


if __name__ == "__main__":
    main()
