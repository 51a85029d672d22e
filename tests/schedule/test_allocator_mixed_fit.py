"""Best fit across families: on a node where NVIDIA and AMD devices both serve ``GPU``, a
fractional request packs a partly used device of either family before it opens a fresh one."""

from __future__ import annotations

from accelkit import Allocator, Device, Grant, Node
from accelkit.quantities import UNIT, to_units
from hypothesis import given, settings
from hypothesis import strategies as st

TYPES = {"nvidia": "A10", "amd": "MI210"}
SHARES = (0.1, 0.25, 0.5, 0.75)


def mixed_node(nvidia: int, amd: int) -> Node:
    """``nvidia`` A10s and ``amd`` MI210s, every one a ``GPU``."""
    devices = [
        Device(str(i), i, family=family, resource_name="GPU", type_label=TYPES[family])
        for family, count in (("nvidia", nvidia), ("amd", amd))
        for i in range(count)
    ]
    resources = {"GPU": float(nvidia + amd)}
    resources.update({f"accelerator_type:{TYPES[f]}": 1.0 for f, n in TYPES.items()})
    return Node(devices=devices, resources=resources)


def free_units(node: Node, held: list[Grant]) -> dict[tuple[str, str], int]:
    free = {(d.family, d.id): UNIT for d in node.devices}
    for grant in held:
        for device, share in grant.devices:
            free[(device.family, device.id)] -= to_units(share)
    return free


def test_a_half_goes_to_the_half_used_device_of_another_family() -> None:
    allocator = Allocator(mixed_node(1, 1))
    first = allocator.acquire({"GPU": 0.5}, accelerator_type="MI210")
    assert first is not None and first.ids == {"GPU": ["0"]}
    second = allocator.acquire({"GPU": 0.5})
    assert second is not None
    assert [(d.family, d.id) for d, _share in second.devices] == [("amd", "0")]
    whole = allocator.acquire({"GPU": 1})
    assert whole is not None and [d.family for d, _share in whole.devices] == ["nvidia"]


steps = st.lists(
    st.tuples(st.sampled_from(SHARES), st.sampled_from([None, "A10", "MI210"]), st.booleans()),
    min_size=1,
    max_size=30,
)


@settings(max_examples=200, deadline=None)
@given(nvidia=st.integers(1, 3), amd=st.integers(1, 3), plan=steps)
def test_a_fraction_never_opens_a_fresh_device_while_a_used_one_fits(
    nvidia: int, amd: int, plan: list[tuple[float, object, bool]]
) -> None:
    node = mixed_node(nvidia, amd)
    allocator = Allocator(node)
    held: list[Grant] = []
    for share, kind, release_oldest in plan:
        if release_oldest and held:
            allocator.release(held.pop(0))
        before = free_units(node, held)
        label = kind if isinstance(kind, str) else None
        grant = allocator.acquire({"GPU": share}, accelerator_type=label)
        if grant is None:
            continue
        held.append(grant)
        if label is not None:
            continue  # a typed request may only take its family's devices
        ((device, _taken),) = grant.devices
        fits = [left for left in before.values() if left >= to_units(share)]
        assert before[(device.family, device.id)] == min(fits)  # the tightest, of any family
