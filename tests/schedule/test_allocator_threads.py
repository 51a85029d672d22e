"""Many threads acquiring and releasing at once never over-allocate and lose nothing."""

from __future__ import annotations

import json
import random
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from accelkit import Allocator
from accelkit.quantities import UNIT
from sched_nodes import devices, make_node

REQUESTS = [
    {"GPU": 0.25},
    {"GPU": 1 / 3},
    {"GPU": 0.5},
    {"GPU": 1},
    {"GPU": 2},
    {"custom": 0.5},
    {"GPU": 1, "custom": 0.5},  # two resources: all or nothing, under contention too
]


@pytest.fixture
def busy_switching() -> Iterator[None]:
    """Switch threads very often, so acquire and release interleave as much as they can."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def in_threads(work: Callable[[random.Random], None], count: int = 8) -> list[str]:
    """``work`` in ``count`` threads at once, each with its own seeded random; their errors."""
    errors: list[str] = []

    def worker(seed: int) -> None:
        try:
            work(random.Random(seed))
        except Exception as error:  # a thread's exception would otherwise only be printed
            errors.append(f"thread {seed}: {error!r}")

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def test_threads_share_one_allocator(busy_switching: None) -> None:
    node = make_node(devices("nvidia", 4), custom=2.0)
    alloc = Allocator(node)
    usage = {d.id: 0 for d in node.devices}
    usage["custom"] = 0
    guard = threading.Lock()
    errors: list[str] = []
    granted = [0]

    def work(rng: random.Random) -> None:
        for _ in range(1000):
            grant = alloc.acquire(rng.choice(REQUESTS))
            if grant is None:
                continue
            held = [(d.id, round(share * UNIT)) for d, share in grant.devices]
            held.append(("custom", round(grant.resources.get("custom", 0.0) * UNIT)))
            with guard:
                granted[0] += 1
                for name, units in held:
                    usage[name] += units
                    limit = 2 * UNIT if name == "custom" else UNIT
                    if usage[name] > limit:
                        errors.append(f"{name} over-allocated: {usage[name]}")
            with guard:
                for name, units in held:
                    usage[name] -= units
            alloc.release(grant)

    errors.extend(in_threads(work))
    assert errors == []
    assert granted[0] > 0
    assert alloc.available() == {"GPU": 4.0, "custom": 2.0}
    assert alloc.grants() == []


def test_threads_keeping_grants_leave_an_exact_ledger(busy_switching: None) -> None:
    """Threads acquire, keep some grants and release the others; at the end every device's
    share is the sum of the live grants' shares, and nothing else is held."""
    node = make_node(devices("nvidia", 6), custom=3.0)
    alloc = Allocator(node)
    kept: list[Any] = []
    guard = threading.Lock()

    def work(rng: random.Random) -> None:
        for _ in range(400):
            grant = alloc.acquire(rng.choice(REQUESTS))
            if grant is None:
                continue
            if rng.random() < 0.1:
                with guard:
                    kept.append(grant)
            else:
                alloc.release(grant)

    assert in_threads(work) == []
    assert kept
    live = sorted(json.dumps(g.to_dict(), sort_keys=True) for g in alloc.grants())
    assert live == sorted(json.dumps(g.to_dict(), sort_keys=True) for g in kept)
    held = {d.id: 0 for d in node.devices}
    custom = 0
    for grant in kept:
        for device, share in grant.devices:
            held[device.id] += round(share * UNIT)
        custom += round(grant.resources.get("custom", 0.0) * UNIT)
    assert all(units <= UNIT for units in held.values()), held
    free = alloc.available()
    assert round(free.get("GPU", 0.0) * UNIT) == 6 * UNIT - sum(held.values())
    assert round(free.get("custom", 0.0) * UNIT) == 3 * UNIT - custom
    rebuilt = Allocator(node)
    rebuilt.restore(kept)
    assert rebuilt.available() == free
