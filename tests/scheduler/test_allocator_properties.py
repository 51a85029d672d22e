"""Stateful property tests: the allocator against a naive model that scans every device.

Random acquire/release/restore sequences on random nodes must never over-allocate, never lose
capacity, follow each family's placement rule, best-fit fractions with ties to the lowest index,
and answer None exactly when the model finds no room.
"""

from __future__ import annotations

import json
from typing import Optional

from accelkit import Allocator, Grant, InvalidRequest, Node, validate_request
from accelkit.quantities import UNIT, to_units
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    precondition,
    rule,
)
from sched_nodes import devices, make_node

# family -> (resource, the shares a request may take)
FAMILIES = {
    "nvidia": ("GPU", [0.1, 0.25, 1 / 3, 0.5, 0.75, 1, 2, 3]),
    "ascend": ("NPU", [0.2, 0.5, 1, 2]),
    "tpu": ("TPU", [1, 2, 4, 8]),
    "neuron": ("neuron_cores", [1, 2, 3, 5]),
}
RULES = {"nvidia": "lowest", "ascend": "lowest", "tpu": "aligned", "neuron": "contiguous"}


class Model:
    """Free units per (family, device id), and naive placement by scanning."""

    def __init__(self, node: Node) -> None:
        self.order = {f: [d.id for d in node.devices if d.family == f] for f in FAMILIES}
        self.free = {(d.family, d.id): UNIT for d in node.devices}
        self.custom = round(node.resources.get("custom", 0.0) * UNIT)

    def place(self, family: str, units: int) -> Optional[list[str]]:
        ids = self.order[family]
        if units < UNIT:  # best fit, ties to the lowest index
            fits = [(self.free[(family, i)], n, i) for n, i in enumerate(ids)]
            fits = [f for f in fits if f[0] >= units]
            return [min(fits)[2]] if fits else None
        count = units // UNIT
        full = [i for i in ids if self.free[(family, i)] == UNIT]
        if RULES[family] == "lowest":
            return full[:count] if len(full) >= count else None
        step = count if RULES[family] == "aligned" else 1
        numbers = {int(i) for i in full}
        for start in range(0, max(map(int, ids), default=0) + 1, step):
            block = list(range(start, start + count))
            if set(block) <= numbers:
                return [str(n) for n in block]
        return None


@st.composite
def nodes(draw: st.DrawFn) -> Node:
    groups = [devices("nvidia", draw(st.integers(0, 5)))]
    groups.append(devices("ascend", draw(st.integers(0, 3))))
    groups.append(devices("tpu", draw(st.sampled_from([0, 1, 2, 4, 8]))))
    groups.append(devices("neuron", draw(st.integers(0, 7))))
    return make_node(*groups, custom=float(draw(st.integers(0, 3))))


class AllocatorMachine(RuleBasedStateMachine):
    grants = Bundle("grants")

    @initialize(node=nodes())
    def start(self, node: Node) -> None:
        self.node = node
        self.alloc = Allocator(node)
        self.model = Model(node)
        self.held: dict[int, Grant] = {}

    @rule(
        target=grants,
        family=st.sampled_from(sorted(FAMILIES)),
        pick=st.integers(0, 7),
        custom=st.sampled_from([0, 0, 0.5, 1]),
    )
    def acquire(self, family: str, pick: int, custom: float) -> Grant:
        resource, shares = FAMILIES[family]
        share = shares[pick % len(shares)]
        units = round(share * UNIT) if share >= 1 else int(share * UNIT)
        request = {resource: share, "custom": custom}
        expected = self.model.place(family, units) if self.model.order[family] else None
        room_for_custom = round(custom * UNIT) <= self.model.custom
        try:
            grant = self.alloc.acquire(request)
        except InvalidRequest:
            # Never: more than the family has, a block it cannot form, or more custom than exists.
            idle = Model(self.node)
            assert idle.place(family, units) is None or round(custom * UNIT) > idle.custom
            return None  # type: ignore[return-value]
        if expected is None or not room_for_custom:
            assert grant is None, (request, grant)
            return None  # type: ignore[return-value]
        assert grant is not None, (request, expected)
        assert grant.ids == {resource: expected}
        for device, granted in grant.devices:
            self.model.free[(device.family, device.id)] -= round(granted * UNIT)
        self.model.custom -= round(custom * UNIT)
        self.held[grant.token] = grant
        return grant

    @rule(grant=consumes(grants))
    def release(self, grant: Optional[Grant]) -> None:
        if grant is None:
            return
        self.alloc.release(grant)
        del self.held[grant.token]
        for device, share in grant.devices:
            self.model.free[(device.family, device.id)] += round(share * UNIT)
        self.model.custom += round(grant.resources.get("custom", 0.0) * UNIT)
        before = self.alloc.available()
        try:
            self.alloc.release(grant)
        except InvalidRequest:
            pass
        else:
            raise AssertionError("a second release was accepted")
        assert self.alloc.available() == before

    @precondition(lambda self: self.held)
    @rule()
    def restart(self) -> None:
        saved = json.dumps([g.to_dict() for g in self.alloc.grants()])
        before = self.alloc.available()
        self.alloc = Allocator(Node.from_dict(json.loads(json.dumps(self.node.to_dict()))))
        self.alloc.restore(json.loads(saved))
        assert self.alloc.available() == before

    @invariant()
    def matches_the_model(self) -> None:
        available = self.alloc.available()
        for family, (resource, _shares) in FAMILIES.items():
            ids = self.model.order[family]
            free = [self.model.free[(family, i)] for i in ids]
            assert all(0 <= f <= UNIT for f in free)  # never over-allocated
            if ids:
                assert round(available[resource] * UNIT) == sum(free)  # never lost
        assert round(available.get("custom", 0.0) * UNIT) == self.model.custom
        assert {g.token for g in self.alloc.grants()} == set(self.held)

    def teardown(self) -> None:
        for grant in list(self.held.values()):
            self.alloc.release(grant)
        assert self.alloc.available() == Allocator(self.node).available()


AllocatorMachine.TestCase.settings = settings(
    max_examples=100,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
test_allocator_state_machine = AllocatorMachine.TestCase


@settings(max_examples=200, deadline=None)
@given(share=st.floats(min_value=0.0001, max_value=0.9999))
def test_a_device_holds_exactly_as_many_shares_as_fit_in_units(share: float) -> None:
    units = validate_request({"GPU": share})["GPU"]
    assert units == to_units(share) and 1 <= units < UNIT
    alloc = Allocator(make_node(devices("nvidia", 1)))
    fits = UNIT // units
    prefill = max(0, fits - 100) * units  # keep it fast: one big share stands for the rest
    if prefill:
        assert alloc.acquire({"GPU": prefill / UNIT}) is not None
    held = [alloc.acquire({"GPU": share}) for _ in range(fits - prefill // units)]
    assert None not in held
    assert alloc.acquire({"GPU": share}) is None
    assert round(alloc.available()["GPU"] * UNIT) == UNIT - fits * units
    for grant in held:
        assert grant is not None
        alloc.release(grant)
    assert round(alloc.available()["GPU"] * UNIT) == UNIT - prefill
