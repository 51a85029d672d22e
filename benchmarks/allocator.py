"""Allocator throughput: acquire+release pairs per second, whole and fractional, by node size.

Run: ``python benchmarks/allocator.py [--pairs N] [--repeat R]``.

Each case times ``release(acquire(request))`` on a node of 8, 32 or 128 devices that is already
half busy, restored from saved grants so both allocators start from the same state:

- ``whole`` (``{"GPU": 1}``) and ``fractional`` (``{"GPU": 0.5}``): every even GPU holds a share
  of 0.1 to 0.7, so the lowest fully free device is never device 0 and best fit has seven levels
  of free room to choose from;
- ``contiguous`` (``{"neuron_cores": 2}``): every even core in the lower half of the node is
  held, so the lowest free pair of cores is in the upper half (the search has to get past the
  holes).

The peer, measured in the same run on the same states, is a naive allocator that keeps a list of
free shares and scans it on every acquire (what a scheduler writes first). The report prints
pairs/s, the per-pair cost on 128 devices relative to 8 (flat is the goal; the target is at most
2x, with at least 150,000 pairs/s on 8 devices on a 2-core machine), and accelkit's speed
relative to the peer.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any, Optional

from accelkit import Allocator, Device, Grant, Node

SIZES = (8, 32, 128)
# case -> (family, resource, request)
CASES = {
    "whole": ("nvidia", "GPU", {"GPU": 1}),
    "fractional": ("nvidia", "GPU", {"GPU": 0.5}),
    "contiguous": ("neuron", "neuron_cores", {"neuron_cores": 2}),
}


class NaiveAllocator:
    """The peer: free shares in a list, a scan per acquire, grants in a dict."""

    def __init__(self, count: int, contiguous: bool) -> None:
        self.free = [1.0] * count
        self.contiguous = contiguous
        self.live: dict[int, list[tuple[int, float]]] = {}
        self.next_token = 0

    def acquire(self, request: dict[str, float]) -> Optional[int]:
        (amount,) = request.values()
        if amount >= 1:
            count = int(amount)
            if self.contiguous:
                starts = range(len(self.free) - count + 1)
                start = next((i for i in starts if min(self.free[i : i + count]) == 1.0), None)
                chosen = [] if start is None else list(range(start, start + count))
            else:
                chosen = [i for i, f in enumerate(self.free) if f == 1.0][:count]
            if len(chosen) < count:
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


def node_of(family: str, resource: str, count: int) -> Node:
    ids = [Device(id=str(i), index=i, family=family, resource_name=resource) for i in range(count)]
    return Node(devices=ids, resources={resource: float(count)})


def busy_state(case: str, node: Node) -> list[tuple[int, float]]:
    """(device index, share held) for the half-busy state of ``case``."""
    count = len(node.devices)
    if case == "contiguous":
        return [(i, 1.0) for i in range(0, count // 2, 2)]
    return [(i, round(0.1 * (1 + (i // 2) % 7), 1)) for i in range(0, count, 2)]


def prepared(case: str, size: int) -> tuple[Allocator, NaiveAllocator]:
    """Both allocators in the same half-busy state (accelkit's through ``restore``)."""
    family, resource, _request = CASES[case]
    node = node_of(family, resource, size)
    held = busy_state(case, node)
    ours = Allocator(node)
    ours.restore(
        Grant(token, {resource: share}, [(node.devices[index], share)])
        for token, (index, share) in enumerate(held, start=1)
    )
    peer = NaiveAllocator(size, contiguous=case == "contiguous")
    for index, share in held:
        peer.free[index] -= share
    return ours, peer


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
    for case, (_family, _resource, request) in CASES.items():
        for size in SIZES:
            ours, peer = prepared(case, size)
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
