"""Allocator throughput: acquire+release pairs per second, whole and fractional, by node size.

Run: ``python benchmarks/allocator.py [--pairs N] [--repeat R]``.

Each case times ``release(acquire(request))`` on a node of 8, 32 or 128 GPUs that is already
half busy (every other device holds a share of 0.1 to 0.7, so best fit has several levels to
choose from and the lowest free device is not simply device 0). The peer, measured in the same
run on the same states, is a naive allocator that keeps a list of free shares and scans it on
every acquire (what a scheduler writes first). The report prints pairs/s, the per-pair cost on
128 devices relative to 8 (flat is the goal), and accelkit's speed relative to the peer.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any, Optional

from accelkit import Allocator, Device, Node

SIZES = (8, 32, 128)
CASES = {"whole": {"GPU": 1}, "fractional": {"GPU": 0.5}}


class NaiveAllocator:
    """The peer: free shares in a list, a scan per acquire, grants in a dict."""

    def __init__(self, count: int) -> None:
        self.free = [1.0] * count
        self.live: dict[int, list[tuple[int, float]]] = {}
        self.next_token = 0

    def acquire(self, request: dict[str, float]) -> Optional[int]:
        amount = request["GPU"]
        if amount >= 1:
            chosen = [i for i, f in enumerate(self.free) if f == 1.0][: int(amount)]
            if len(chosen) < amount:
                return None
            taken = [(i, 1.0) for i in chosen]
        else:
            fits = [(f, i) for i, f in enumerate(self.free) if f >= amount]
            if not fits:
                return None
            taken = [(min(fits)[1], amount)]
        for index, share in taken:
            self.free[index] -= share
        self.next_token += 1
        self.live[self.next_token] = taken
        return self.next_token

    def release(self, token: int) -> None:
        for index, share in self.live.pop(token):
            self.free[index] += share


def node_of(count: int) -> Node:
    gpus = [Device(id=str(i), index=i, family="nvidia", resource_name="GPU") for i in range(count)]
    return Node(devices=gpus, resources={"GPU": float(count)})


def make_busy(acquire: Callable[[dict[str, float]], Any], count: int) -> None:
    """Hold a share of 0.1..0.7 on about half the devices (the same shares for both allocators)."""
    for i in range(count // 2):
        acquire({"GPU": round(0.1 * (1 + i % 7), 1)})


def pairs_per_second(
    acquire: Callable[[dict[str, float]], Any],
    release: Callable[[Any], None],
    request: dict[str, float],
    pairs: int,
    repeat: int,
) -> float:
    """Best of ``repeat`` timings of ``pairs`` acquire+release pairs."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(pairs):
            release(acquire(request))
        best = min(best, time.perf_counter() - start)
    return pairs / best


def measure(pairs: int, repeat: int) -> dict[tuple[str, int], tuple[float, float]]:
    """(case, size) -> (accelkit pairs/s, naive pairs/s)."""
    results = {}
    for case, request in CASES.items():
        for size in SIZES:
            ours = Allocator(node_of(size))
            make_busy(ours.acquire, size)
            peer = NaiveAllocator(size)
            make_busy(peer.acquire, size)
            results[(case, size)] = (
                pairs_per_second(ours.acquire, ours.release, request, pairs, repeat),
                pairs_per_second(peer.acquire, peer.release, request, pairs, repeat),
            )
    return results


def report(results: dict[tuple[str, int], tuple[float, float]]) -> str:
    lines = [
        f"{'case':<11} {'devices':>7} {'accelkit pairs/s':>17} {'us/pair':>8} "
        f"{'naive pairs/s':>14} {'accelkit/naive':>15}"
    ]
    for (case, size), (ours, peer) in results.items():
        lines.append(
            f"{case:<11} {size:>7} {ours:>17,.0f} {1e6 / ours:>8.2f} {peer:>14,.0f} "
            f"{ours / peer:>14.2f}x"
        )
    lines.append("")
    lines.append("per-pair cost, 128 devices vs 8 (1.00 = flat; target <= 2.00):")
    for case in CASES:
        ours8, peer8 = results[(case, 8)]
        ours128, peer128 = results[(case, 128)]
        lines.append(f"  {case:<11} accelkit {ours8 / ours128:.2f}x   naive {peer8 / peer128:.2f}x")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=50_000, help="pairs per timing")
    parser.add_argument("--repeat", type=int, default=5, help="timings per case (best is kept)")
    args = parser.parse_args()
    print(report(measure(args.pairs, args.repeat)))


if __name__ == "__main__":
    main()
