"""Start-up cost beside a bare interpreter and beside Ray, measured in one run.

Run: ``python benchmarks/peer_ray.py [--rounds N] [--node-rounds M]`` with Ray installed
(``pip install -e ".[bench]"``). The script re-runs itself in a loopback-only network namespace
(``unshare -n``, then ``ip link set lo up``) with ``RAY_USAGE_STATS_ENABLED=0``, so neither
library can reach a network; it needs ``unshare`` and the right to use it (root, or user
namespaces).

Each round starts every command below once, in the same order, as its own process; a figure is
the median over the rounds, and a ratio compares two figures of the same run. Wall time is timed
around the command started directly; peak RSS is that command's alone, read in a second start
under ``/usr/bin/time -f %M`` (GNU time). ``ru_maxrss`` of a child this script starts itself
would not do: Python starts children with ``vfork``, and at ``exec`` Linux counts the parent's
memory high-water mark into the child's, so every command would weigh at least this script.

- ``bare``: ``python -c pass``, the floor every Python program pays;
- ``import``: ``import accelkit`` / ``import ray``;
- ``import+detect``: ``import accelkit; accelkit.detect_node()`` / what ``ray start`` runs to
  find the node's accelerators (``ResourceAndLabelSpec().resolve(is_head=True)``);
- ``ls --json``: the ``accelkit ls --json`` command / the same Ray detection printed as JSON;
- ``run``: ``accelkit run -r GPU=1 --host nvidia-h100-8gpu -- true`` on a ledger of its own in
  a temporary directory: detection of the recorded node, a grant taken in the ledger, ``exec``
  (Ray has no command of that kind);
- ``ls --json, a vendor plugin``: the same command with the example plugin installed (its
  package and a ``.dist-info`` declaring it on ``PYTHONPATH``): discovery reads third-party entry
  points, and the plugin is imported and detects;
- ``floor``: importing the standard modules and pluggy that accelkit's code is written with
  (:data:`FLOOR`), so the report shows how much of a ratio is accelkit's own.

Then, for every example node in ``examples/nodes``: ``accelkit ls --json --host NODE`` as a
process against ``bare``, and a warm in-process ``detect_node(load_snapshot(NODE))`` against
Ray's warm in-process detection of this machine (Ray cannot replay a recorded node, so its
detection of the machine it runs on is the nearest peer). The targets of issue 22 are checked
at the end: ``ls --json`` at most 3.5x ``bare``, ``run`` at most 4x, ``import accelkit`` at most
1.3x, and the peak RSS of ``ls --json`` at most 1.5x ``bare``'s. Each is also given against the
floor: on a machine whose floor is itself above a target, that ratio is accelkit's own share.

Last, where ``ls --json`` and ``run`` spend their start-up: the import of every module they load,
self time by package (``run``'s ``exec`` is stopped in that measure, so it ends where the command
would start). ``python -X importtime`` misses what ``importlib.import_module`` loads (the verb
modules, the plugins); this times ``importlib._bootstrap._find_and_load``, which both the
``import`` statement and ``import_module`` go through (the timer itself adds a little to each).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import NamedTuple, Optional

IN_NAMESPACE = "ACCELKIT_BENCH_NETNS"
NODES = Path(__file__).resolve().parent.parent / "examples" / "nodes"

RAY_DETECT = (
    "import json, ray\n"
    "from ray._private.resource_and_label_spec import ResourceAndLabelSpec\n"
    "spec = ResourceAndLabelSpec().resolve(is_head=True, node_ip_address='127.0.0.1')\n"
)
RAY_LS = RAY_DETECT + "print(json.dumps(spec.to_resource_dict(), indent=2))\n"

CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
"""The children write bytecode as an installed program does (a wheel install compiles it): the
warm-up run of each command leaves it, so no measured run pays for compiling."""

FLOOR = (
    "import argparse, dataclasses, enum, json, re, threading, typing, pluggy\n"
    "argparse.ArgumentParser().add_argument('--json', action='store_true')\n"
)
"""What any command built on argparse, dataclasses, typing, json, regular expressions and pluggy
imports (argparse's first argument loads its help formatter): accelkit's own cost is above it."""

TARGETS = (  # (what, figure, at most)
    ("accelkit ls --json / bare (time)", "ls_time", 3.5),
    ("accelkit run ... -- true / bare (time)", "run_time", 4.0),
    ("import accelkit / bare (time)", "import_time", 1.3),
    ("accelkit ls --json / bare (peak RSS)", "ls_rss", 1.5),
)


class Sample(NamedTuple):
    seconds: float
    rss_kib: int


def measure(argv: list[str], env: Mapping[str, str] = CHILD_ENV) -> Sample:
    """Wall time of one process running ``argv`` (its output discarded), and the peak RSS of that
    process alone, read in a second run under GNU time (see the module's docstring)."""
    start = time.perf_counter()
    result = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"{argv} failed ({result.returncode}): {result.stderr!r}")
    timed = subprocess.run(
        [TIME, "-f", "%M", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
        check=True,
    )
    return Sample(elapsed, int(timed.stderr.strip().splitlines()[-1]))


TIME = "/usr/bin/time"
"""GNU time: it reports ``ru_maxrss`` of the command it starts, a small C program's child."""


def paired(
    commands: dict[str, list[str]],
    rounds: int,
    envs: Optional[Mapping[str, Mapping[str, str]]] = None,
) -> dict[str, Sample]:
    """Median time and RSS of each command over ``rounds`` rounds of one run of each; a command
    named in ``envs`` runs in that environment."""
    envs = envs or {}
    for name, argv in commands.items():  # warm the file cache and bytecode first
        measure(argv, envs.get(name, CHILD_ENV))
    samples: dict[str, list[Sample]] = {name: [] for name in commands}
    for _ in range(rounds):
        for name, argv in commands.items():
            samples[name].append(measure(argv, envs.get(name, CHILD_ENV)))
    return {
        name: Sample(
            statistics.median(s.seconds for s in runs),
            int(statistics.median(s.rss_kib for s in runs)),
        )
        for name, runs in samples.items()
    }


def warm_in_process(function: Callable[[], object], repeat: int) -> float:
    """Median seconds of ``function()`` after one warm-up call."""
    function()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def process_figures(rounds: int, scratch: Path) -> dict[str, Sample]:
    python = sys.executable
    accelkit = shutil.which("accelkit", path=str(Path(python).parent)) or "accelkit"
    return paired(
        {
            "bare": [python, "-c", "pass"],
            "accelkit import": [python, "-c", "import accelkit"],
            "ray import": [python, "-c", "import ray"],
            "accelkit import+detect": [python, "-c", "import accelkit; accelkit.detect_node()"],
            "ray import+detect": [python, "-c", RAY_DETECT],
            "accelkit ls --json": [accelkit, "ls", "--json"],
            "ray ls --json": [python, "-c", RAY_LS],
            "accelkit ls --json, a vendor plugin": [accelkit, "ls", "--json"],
            "accelkit run": [accelkit, "run", *run_arguments(scratch / LEDGER)],
            "floor": [python, "-c", FLOOR],
        },
        rounds,
        {"accelkit ls --json, a vendor plugin": vendor_plugin_env(scratch / "site")},
    )


LEDGER = "ledger.json"
EXAMPLE_PLUGIN = NODES.parent / "accelkit-example" / "src"


def vendor_plugin_env(site: Path) -> dict[str, str]:
    """The environment of a machine with one vendor plugin installed: the example plugin's
    package on the path, and the distribution ``pip install`` would write for it (discovery
    finds third-party plugins through their entry points)."""
    info = site / "accelkit_example-0.1.0.dist-info"
    info.mkdir(parents=True)
    headers = "Metadata-Version: 2.1\nName: accelkit-example\nVersion: 0.1.0\n"
    (info / "METADATA").write_text(headers)
    (info / "entry_points.txt").write_text("[accelkit]\nacme = accelkit_example\n")
    return {**CHILD_ENV, "PYTHONPATH": os.pathsep.join([str(site), str(EXAMPLE_PLUGIN)])}


def run_arguments(ledger: Path) -> list[str]:
    """``accelkit run``'s arguments after the verb: one GPU of the recorded 8-GPU node."""
    node = str(NODES / "nvidia-h100-8gpu")
    return ["-r", "GPU=1", "--host", node, "--ledger", str(ledger), "--", "true"]


def node_figures(rounds: int) -> tuple[dict[str, Sample], dict[str, tuple[int, float]], float]:
    """Per example node: the ``ls --json --host`` process, warm in-process detection (devices,
    seconds); and Ray's warm in-process detection of this machine."""
    import accelkit
    from ray._private.resource_and_label_spec import ResourceAndLabelSpec

    python = sys.executable
    accelkit_cli = shutil.which("accelkit", path=str(Path(python).parent)) or "accelkit"
    nodes = sorted(p for p in NODES.iterdir() if (p / "snapshot.json").is_file())
    commands = {"bare": [python, "-c", "pass"]}
    commands.update({n.name: [accelkit_cli, "ls", "--json", "--host", str(n)] for n in nodes})
    processes = paired(commands, rounds)
    in_process: dict[str, tuple[int, float]] = {}
    for node in nodes:
        host = accelkit.load_snapshot(node)
        devices = len(accelkit.detect_node(host).devices)
        detect = functools.partial(accelkit.detect_node, host)
        in_process[node.name] = (devices, warm_in_process(detect, 50))
    ray_warm = warm_in_process(
        lambda: ResourceAndLabelSpec().resolve(is_head=True, node_ip_address="127.0.0.1"), 50
    )
    return processes, in_process, ray_warm


def report(rounds: int, node_rounds: int, scratch: Path) -> None:
    figures = process_figures(rounds, scratch)
    bare = figures["bare"]
    print(
        f"{rounds} paired rounds, medians; bare `python -c pass`: {bare.seconds * 1e3:.1f} ms, "
        f"{bare.rss_kib / 1024:.1f} MiB"
    )
    print(f"{'':24}{'accelkit':>10}{'Ray':>10}{'/bare':>8}{'/Ray':>8}")
    checked: dict[str, float] = {}
    for what in ("import", "import+detect", "ls --json"):
        ours, theirs = figures[f"accelkit {what}"], figures[f"ray {what}"]
        print(
            f"{what + ' (ms)':24}{ours.seconds * 1e3:10.1f}{theirs.seconds * 1e3:10.1f}"
            f"{ours.seconds / bare.seconds:8.2f}{ours.seconds / theirs.seconds:8.3f}"
        )
    for what in ("import", "import+detect", "ls --json"):
        ours, theirs = figures[f"accelkit {what}"], figures[f"ray {what}"]
        print(
            f"{what + ' peak RSS (MiB)':24}{ours.rss_kib / 1024:10.1f}{theirs.rss_kib / 1024:10.1f}"
            f"{ours.rss_kib / bare.rss_kib:8.2f}{ours.rss_kib / theirs.rss_kib:8.3f}"
        )
    run, floor = figures["accelkit run"], figures["floor"]
    print(
        f"{'run (ms)':24}{run.seconds * 1e3:10.1f}{'-':>10}{run.seconds / bare.seconds:8.2f}"
        f"{'-':>8}\n{'run peak RSS (MiB)':24}{run.rss_kib / 1024:10.1f}{'-':>10}"
        f"{run.rss_kib / bare.rss_kib:8.2f}{'-':>8}"
    )
    vendor = figures["accelkit ls --json, a vendor plugin"]
    print(
        f"ls --json with the example vendor plugin installed: {vendor.seconds * 1e3:.1f} ms, "
        f"{vendor.seconds / bare.seconds:.2f}x bare, {vendor.seconds / floor.seconds:.2f}x the "
        f"floor, {vendor.seconds / figures['accelkit ls --json'].seconds:.2f}x without it"
    )
    checked["import_time"] = figures["accelkit import"].seconds / bare.seconds
    checked["ls_time"] = figures["accelkit ls --json"].seconds / bare.seconds
    checked["run_time"] = run.seconds / bare.seconds
    checked["ls_rss"] = figures["accelkit ls --json"].rss_kib / bare.rss_kib
    against_floor = {
        "import_time": figures["accelkit import"].seconds / floor.seconds,
        "ls_time": figures["accelkit ls --json"].seconds / floor.seconds,
        "run_time": run.seconds / floor.seconds,
        "ls_rss": figures["accelkit ls --json"].rss_kib / floor.rss_kib,
    }

    processes, in_process, ray_warm = node_figures(node_rounds)
    node_bare = processes["bare"].seconds
    print(
        f"\nexample nodes ({node_rounds} paired rounds; Ray's warm detection of this machine: "
        f"{ray_warm * 1e3:.2f} ms)"
    )
    print(
        f"{'node':24}{'ls --host ms':>13}{'/bare':>7}{'devices':>8}{'warm ms':>9}"
        f"{'ms/device':>10}{'/Ray':>7}"
    )
    for name, (devices, seconds) in in_process.items():
        process = processes[name].seconds
        print(
            f"{name:24}{process * 1e3:13.1f}{process / node_bare:7.2f}{devices:8d}"
            f"{seconds * 1e3:9.2f}{seconds * 1e3 / max(devices, 1):10.3f}"
            f"{seconds / ray_warm:7.3f}"
        )
    print("\ntargets")
    for what, key, limit in TARGETS:
        verdict = "met" if checked[key] <= limit else "NOT met"
        print(
            f"  {what}: {checked[key]:.2f} (at most {limit}): {verdict}; "
            f"{against_floor[key]:.2f}x the floor"
        )
    print(
        f"  floor: importing argparse, dataclasses, enum, json, re, threading, typing and pluggy "
        f"alone takes {floor.seconds * 1e3:.1f} ms, {floor.seconds / bare.seconds:.2f}x bare, "
        f"and {floor.rss_kib / 1024:.1f} MiB, {floor.rss_kib / bare.rss_kib:.2f}x bare's peak RSS"
    )


BREAKDOWN = """
import contextlib, importlib._bootstrap as bootstrap, io, json, os, sys, time
find_and_load = bootstrap._find_and_load
costs, children = {}, []
def timed(name, import_):
    start = time.perf_counter()
    children.append(0.0)
    try:
        return find_and_load(name, import_)
    finally:
        total = time.perf_counter() - start
        inner = children.pop()
        if children:
            children[-1] += total
        costs[name] = (total, total - inner)
bootstrap._find_and_load = timed
def stop_before_exec(*args):
    raise SystemExit(0)
os.execvpe = stop_before_exec
start = time.perf_counter()
from accelkit.cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
    main(ARGV)
print(json.dumps({"total": time.perf_counter() - start, "costs": costs}))
"""
"""Runs ``accelkit ARGV`` in-process with every module load timed (see the module docstring)."""


def print_breakdown(argv: list[str], top: int = 25) -> None:
    """Where ``accelkit ARGV`` spends its start-up: modules loaded, self time by package."""
    script = BREAKDOWN.replace("ARGV", repr(argv))
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=CHILD_ENV, check=True
    )
    data = json.loads(out.stdout.strip().splitlines()[-1])
    costs: dict[str, tuple[float, float]] = data["costs"]
    groups: dict[str, float] = {}
    for name, (_, own) in costs.items():
        parts = name.split(".")
        group = ".".join(parts[:2]) if parts[0] in ("accelkit", "accelkit_plugins") else parts[0]
        groups[group] = groups.get(group, 0.0) + own
    imports = sum(own for _, own in costs.values())
    print(
        f"\nstart-up of `accelkit {' '.join(argv)}` in-process: {data['total'] * 1e3:.1f} ms, "
        f"of which {len(costs)} module imports {imports * 1e3:.1f} ms (self time by package, "
        "import statements and importlib.import_module alike)"
    )
    for group, seconds in sorted(groups.items(), key=lambda item: -item[1])[:top]:
        print(f"  {group:36}{seconds * 1e3:8.2f} ms")


def in_loopback_namespace(argv: list[str]) -> None:
    """Run this script again in a new network namespace with only loopback up, and exit."""
    unshare = shutil.which("unshare")
    if unshare is None:
        raise SystemExit("unshare (util-linux) is needed to cut the benchmark off the network")
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", **{IN_NAMESPACE: "1"})
    script = 'ip link set lo up && exec "$0" "$@"'
    inner = [sys.executable, str(Path(__file__).resolve()), *argv]
    raise SystemExit(subprocess.call([unshare, "-n", "--", "sh", "-c", script, *inner], env=env))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="paired rounds (default 15)")
    parser.add_argument(
        "--node-rounds", type=int, default=5, help="paired rounds per example node (default 5)"
    )
    args = parser.parse_args()
    if os.environ.get(IN_NAMESPACE) != "1":
        in_loopback_namespace(sys.argv[1:])
    with tempfile.TemporaryDirectory(prefix="accelkit-bench-") as scratch:
        report(args.rounds, args.node_rounds, Path(scratch))
        print_breakdown(["ls", "--json"])
        print_breakdown(["run", *run_arguments(Path(scratch) / LEDGER)])


if __name__ == "__main__":
    main()
