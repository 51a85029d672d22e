"""Stateful property tests: the allocator against a naive model that scans every device.

Random acquire/release/restore sequences on random nodes must never over-allocate, never lose
capacity, follow each family's placement rule (lowest free, aligned blocks on TPU chips and on
Gaudi module ids given in any order, contiguous Neuron cores), best-fit fractions with ties to
the lowest index, land typed requests only on their type, grant several resources all or
nothing, and answer None exactly when the model finds no room now (Unsatisfiable exactly when
an idle node has none).
"""

from __future__ import annotations

import json
from typing import Optional

from accelkit import Allocator, Grant, InvalidRequest, Node, Unsatisfiable, validate_request
from accelkit.manager import ACCELERATOR_TYPE_PREFIX
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
    "gaudi": ("HPU", [1, 2, 4, 8]),
    "neuron": ("neuron_cores", [1, 2, 3, 5]),
}
RULES = {
    "nvidia": "lowest",
    "ascend": "lowest",
    "tpu": "aligned",
    "gaudi": "aligned",
    "neuron": "contiguous",
}
LABELS = ("T4", "A100")  # nvidia devices carry one of these; other families none
TYPE_UNITS = 10  # a typed request takes 0.001 of accelerator_type:<label>


def units_of(share: float) -> int:
    return to_units(share)


class Model:
    """Free units per (family, device id), and naive placement by scanning."""

    def __init__(self, node: Node) -> None:
        self.order = {f: [d.id for d in node.devices if d.family == f] for f in FAMILIES}
        self.label = {(d.family, d.id): d.type_label for d in node.devices}
        self.free = {(d.family, d.id): UNIT for d in node.devices}
        self.custom = round(node.resources.get("custom", 0.0) * UNIT)
        self.types = {
            name[len(ACCELERATOR_TYPE_PREFIX) :]: round(value * UNIT)
            for name, value in node.resources.items()
            if name.startswith(ACCELERATOR_TYPE_PREFIX)
        }

    def place(self, family: str, units: int, label: Optional[str]) -> Optional[list[str]]:
        ids = [i for i in self.order[family] if label is None or self.label[(family, i)] == label]
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

    def plan(
        self, picks: list[tuple[str, int]], custom: int, label: Optional[str]
    ) -> Optional[dict[str, list[str]]]:
        """The ids each family's pick gets now, or None when some part does not fit."""
        if custom > self.custom or (label is not None and self.types.get(label, 0) < TYPE_UNITS):
            return None
        plan = {}
        for family, units in picks:
            ids = self.place(family, units, label if family == "nvidia" else None)
            if ids is None:
                return None
            plan[FAMILIES[family][0]] = ids
        return plan


@st.composite
def nodes(draw: st.DrawFn) -> Node:
    t4 = draw(st.integers(0, 3))
    a100 = draw(st.integers(0, 3))
    names = [str(i) for i in range(t4 + a100)]
    groups = [
        devices("nvidia", ids=names[:t4], label="T4")
        + devices("nvidia", ids=names[t4:], label="A100")
    ]
    groups[0] = [d.replace(index=n) for n, d in enumerate(groups[0])]
    groups.append(devices("ascend", draw(st.integers(0, 3))))
    groups.append(devices("tpu", draw(st.sampled_from([0, 1, 2, 4, 8]))))
    modules = draw(st.permutations([str(i) for i in range(draw(st.sampled_from([0, 2, 4, 8])))]))
    groups.append(devices("gaudi", ids=modules))  # module ids in any index order
    groups.append(devices("neuron", draw(st.integers(0, 7))))
    return make_node(*groups, custom=float(draw(st.integers(0, 3))))


picks = st.lists(
    st.tuples(st.sampled_from(sorted(FAMILIES)), st.integers(0, 7)),
    min_size=1,
    max_size=2,
    unique_by=lambda pick: FAMILIES[pick[0]][0],
)


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
        chosen=picks,
        custom=st.sampled_from([0, 0, 0.5, 1]),
        label=st.sampled_from([None, None, *LABELS]),
    )
    def acquire(
        self, chosen: list[tuple[str, int]], custom: float, label: Optional[str]
    ) -> Optional[Grant]:
        wanted = []
        request: dict[str, object] = {"custom": custom}
        for family, pick in chosen:
            resource, shares = FAMILIES[family]
            share = shares[pick % len(shares)]
            request[resource] = share
            wanted.append((family, units_of(share)))
        custom_units = units_of(custom)
        typed = label is not None and any(f == "nvidia" for f, _ in wanted)
        before = self.alloc.available()
        try:
            grant = self.alloc.acquire(request, accelerator_type=label)
        except Unsatisfiable:
            # Never: an idle node has no room for some part (a type on no requested resource
            # counts, as the type would constrain nothing).
            idle = Model(self.node).plan(wanted, custom_units, label)
            assert idle is None or (label is not None and not typed), (request, label, idle)
            assert self.alloc.available() == before
            return None
        assert label is None or typed, (request, label)
        expected = self.model.plan(wanted, custom_units, label)
        if expected is None:
            assert grant is None, (request, label, grant)
            assert self.alloc.available() == before  # all or nothing
            return None
        assert grant is not None, (request, label, expected)
        assert grant.ids == expected
        for device, granted in grant.devices:
            assert label is None or device.family != "nvidia" or device.type_label == label
            self.model.free[(device.family, device.id)] -= units_of(granted)
        self.model.custom -= custom_units
        if label is not None:
            self.model.types[label] -= TYPE_UNITS
        self.held[grant.token] = grant
        return grant

    @rule(grant=consumes(grants))
    def release(self, grant: Optional[Grant]) -> None:
        if grant is None:
            return
        self.alloc.release(grant)
        del self.held[grant.token]
        for device, share in grant.devices:
            self.model.free[(device.family, device.id)] += units_of(share)
        self.model.custom += units_of(grant.resources.get("custom", 0.0))
        for label in self.model.types:
            self.model.types[label] += units_of(
                grant.resources.get(ACCELERATOR_TYPE_PREFIX + label, 0.0)
            )
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
        # Restoring any of them again would over-commit: refused, and nothing changes.
        try:
            self.alloc.restore(json.loads(saved)[:1])
        except InvalidRequest:
            pass
        else:
            raise AssertionError("a grant was restored twice")
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
        for label, free_units in self.model.types.items():
            assert round(available[ACCELERATOR_TYPE_PREFIX + label] * UNIT) == free_units
        assert {g.token for g in self.alloc.grants()} == set(self.held)

    def teardown(self) -> None:
        for grant in list(self.held.values()):
            self.alloc.release(grant)
        assert self.alloc.available() == Allocator(self.node).available()


AllocatorMachine.TestCase.settings = settings(
    max_examples=150,
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
