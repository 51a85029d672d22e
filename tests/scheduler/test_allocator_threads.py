"""Many threads acquiring and releasing at once never over-allocate and lose nothing."""

from __future__ import annotations

import random
import sys
import threading
from collections.abc import Iterator

import pytest
from accelkit import Allocator
from accelkit.quantities import UNIT
from sched_nodes import devices, make_node

REQUESTS = [{"GPU": 0.25}, {"GPU": 1 / 3}, {"GPU": 0.5}, {"GPU": 1}, {"GPU": 2}, {"custom": 0.5}]


@pytest.fixture
def busy_switching() -> Iterator[None]:
    """Switch threads very often, so acquire and release interleave as much as they can."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def test_threads_share_one_allocator(busy_switching: None) -> None:
    node = make_node(devices("nvidia", 4), custom=2.0)
    alloc = Allocator(node)
    usage = {d.id: 0 for d in node.devices}
    guard = threading.Lock()
    errors: list[str] = []
    granted = [0]

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(1000):
            grant = alloc.acquire(rng.choice(REQUESTS))
            if grant is None:
                continue
            with guard:
                granted[0] += 1
                for device, share in grant.devices:
                    usage[device.id] += round(share * UNIT)
                    if usage[device.id] > UNIT:
                        errors.append(f"{device.id} over-allocated: {usage[device.id]}")
            with guard:
                for device, share in grant.devices:
                    usage[device.id] -= round(share * UNIT)
            alloc.release(grant)

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert granted[0] > 0
    assert alloc.available() == {"GPU": 4.0, "custom": 2.0}
    assert alloc.grants() == []
