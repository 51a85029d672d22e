"""Allocator: placement, best fit, exact arithmetic, types, all-or-nothing, release and restore."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from decimal import Decimal
from fractions import Fraction

import pytest
from accelkit import Allocator, ConfigurationError, Grant, InvalidRequest, Node, Unsatisfiable
from sched_nodes import devices, make_node


def take(alloc: Allocator, request: dict[str, object], **kwargs: str) -> Grant:
    grant = alloc.acquire(request, **kwargs)
    assert grant is not None, f"{request} did not fit; available {alloc.available()}"
    return grant


def ids_of(grants: Sequence[Grant], resource: str) -> list[list[str]]:
    return [g.ids[resource] for g in grants]


# -- whole devices: each family's placement rule -----------------------------------------------
def test_lowest_free_by_default() -> None:
    alloc = Allocator(make_node(devices("nvidia", 4)))
    first, second = take(alloc, {"GPU": 1}), take(alloc, {"GPU": 2})
    assert ids_of([first, second], "GPU") == [["0"], ["1", "2"]]
    alloc.release(first)
    assert take(alloc, {"GPU": 2}).ids["GPU"] == ["0", "3"]


def test_lowest_free_follows_index_order_not_id_order() -> None:
    node = make_node(devices("nvidia", ids=["GPU-b", "GPU-a"]))
    assert take(Allocator(node), {"GPU": 1}).ids["GPU"] == ["GPU-b"]


@pytest.mark.parametrize(
    ("family", "resource", "steps", "expected"),
    [
        # aligned blocks: a 2-chip grant is {0,1} or {2,3}, never {1,2}
        ("tpu", "TPU", [1, 2], [["0"], ["2", "3"]]),
        ("tpu", "TPU", [1, 1, 2, 4], [["0"], ["1"], ["2", "3"], ["4", "5", "6", "7"]]),
        ("gaudi", "HPU", [2, 1, 4], [["0", "1"], ["2"], ["4", "5", "6", "7"]]),
        ("gaudi", "HPU", [8], [[str(i) for i in range(8)]]),
        # contiguous cores: the lowest run that fits, at any offset
        ("neuron", "neuron_cores", [1, 2, 3], [["0"], ["1", "2"], ["3", "4", "5"]]),
    ],
)
def test_placement_rules_come_from_the_family(
    family: str, resource: str, steps: list[int], expected: list[list[str]]
) -> None:
    alloc = Allocator(make_node(devices(family, 8)))
    assert ids_of([take(alloc, {resource: n}) for n in steps], resource) == expected


def test_aligned_blocks_wait_for_an_aligned_block() -> None:
    alloc = Allocator(make_node(devices("tpu", 4)))
    chips = [take(alloc, {"TPU": 1}) for _ in range(4)]
    alloc.release(chips[0])
    alloc.release(chips[2])
    assert alloc.available()["TPU"] == 2.0
    assert alloc.acquire({"TPU": 2}) is None  # chips 0 and 2 are free, but not a block


def test_contiguous_cores_skip_holes() -> None:
    alloc = Allocator(make_node(devices("neuron", 6)))
    grants = [take(alloc, {"neuron_cores": 1}) for _ in range(6)]
    for index in (1, 3, 4):
        alloc.release(grants[index])
    assert take(alloc, {"neuron_cores": 2}).ids["neuron_cores"] == ["3", "4"]
    assert alloc.acquire({"neuron_cores": 2}) is None


def test_id_keyed_placement_uses_module_ids() -> None:
    node = make_node(devices("gaudi", ids=["4", "5", "6", "7", "0", "1", "2", "3"]))
    assert take(Allocator(node), {"HPU": 4}).ids["HPU"] == ["0", "1", "2", "3"]


# -- fractions: best fit, ties to the lowest index ---------------------------------------------
def test_best_fit_packs_one_device_before_opening_the_next() -> None:
    alloc = Allocator(make_node(devices("nvidia", 3)))
    grants = [take(alloc, {"GPU": 0.5}) for _ in range(3)]
    assert ids_of(grants, "GPU") == [["0"], ["0"], ["1"]]


def test_best_fit_picks_the_tightest_device() -> None:
    alloc = Allocator(make_node(devices("nvidia", 3)))
    take(alloc, {"GPU": 0.5})  # GPU 0: 0.5 free
    take(alloc, {"GPU": 0.75})  # GPU 1 (0 has only 0.5): 0.25 free
    assert take(alloc, {"GPU": 0.25}).ids["GPU"] == ["1"]  # tightest, not lowest
    assert take(alloc, {"GPU": 0.5}).ids["GPU"] == ["0"]
    assert take(alloc, {"GPU": 0.6}).ids["GPU"] == ["2"]


def test_whole_requests_take_fully_free_devices_only() -> None:
    alloc = Allocator(make_node(devices("nvidia", 2)))
    take(alloc, {"GPU": 0.1})
    assert take(alloc, {"GPU": 1}).ids["GPU"] == ["1"]
    assert alloc.acquire({"GPU": 1}) is None
    assert take(alloc, {"GPU": 0.9}).ids["GPU"] == ["0"]


@pytest.mark.parametrize(
    ("share", "count"), [(0.1, 10), (1 / 3, 3), (0.25, 4), (0.2, 5), (0.0001, 10000)]
)
def test_exact_arithmetic_fills_one_device(share: float, count: int) -> None:
    alloc = Allocator(make_node(devices("nvidia", 2)))
    grants = [take(alloc, {"GPU": share}) for _ in range(count)]
    assert {g.ids["GPU"][0] for g in grants} == {"0"}
    assert take(alloc, {"GPU": 1}).ids["GPU"] == ["1"]
    for grant in grants:
        alloc.release(grant)
    assert alloc.available()["GPU"] == 1.0
    assert take(alloc, {"GPU": 1}).ids["GPU"] == ["0"]


def test_thirds_leave_their_remainder() -> None:
    alloc = Allocator(make_node(devices("nvidia", 1)))
    for _ in range(3):
        take(alloc, {"GPU": 1 / 3})
    assert alloc.available() == {"GPU": 0.0001}
    assert take(alloc, {"GPU": 0.0001}).ids["GPU"] == ["0"]
    assert alloc.acquire({"GPU": 0.0001}) is None


def test_families_that_refuse_fractions_are_never_shared() -> None:
    with pytest.raises(InvalidRequest, match="fractional"):
        Allocator(make_node(devices("tpu", 4))).acquire({"TPU": 0.5})


def test_npu_shares() -> None:
    alloc = Allocator(make_node(devices("ascend", 2)))
    grants = [take(alloc, {"NPU": 0.25}) for _ in range(5)]
    assert ids_of(grants, "NPU") == [["0"]] * 4 + [["1"]]


# -- types, families and plain capacity --------------------------------------------------------
def mixed_node() -> Node:
    return make_node(
        devices("nvidia", ids=["0", "1"], label="T4")
        + devices("nvidia", ids=["2", "3"], label="A100")
    )


def test_type_requests_land_only_on_that_type() -> None:
    alloc = Allocator(mixed_node())
    assert take(alloc, {"GPU": 1}, accelerator_type="A100").ids["GPU"] == ["2"]
    assert take(alloc, {"GPU": 0.5}, accelerator_type="A100").ids["GPU"] == ["3"]
    assert take(alloc, {"GPU": 0.5, "accelerator_type:A100": 0.001}).ids["GPU"] == ["3"]
    assert alloc.acquire({"GPU": 1}, accelerator_type="A100") is None
    assert take(alloc, {"GPU": 1}).ids["GPU"] == ["0"]
    assert alloc.available()["accelerator_type:A100"] == pytest.approx(0.997)


def test_type_resource_is_capacity_too() -> None:
    alloc = Allocator(mixed_node())
    whole_type = take(alloc, {"accelerator_type:T4": 1})
    assert whole_type.devices == ()
    assert alloc.acquire({"GPU": 1}, accelerator_type="T4") is None
    alloc.release(whole_type)
    assert take(alloc, {"GPU": 1}, accelerator_type="T4").ids["GPU"] == ["0"]


def test_one_family_per_resource_per_grant() -> None:
    node = make_node(devices("nvidia", 1), devices("amd", 2))
    alloc = Allocator(node)
    nvidia_whole = take(alloc, {"GPU": 1})
    assert [d.family for d, _ in nvidia_whole.devices] == ["nvidia"]
    two = take(alloc, {"GPU": 2})
    assert [d.family for d, _ in two.devices] == ["amd", "amd"]
    alloc.release(two)
    alloc.release(nvidia_whole)
    # 3 GPUs exist, but no family has 3: never, not "later".
    with pytest.raises(Unsatisfiable):
        alloc.acquire({"GPU": 3})


def test_all_or_nothing_across_resources() -> None:
    alloc = Allocator(make_node(devices("nvidia", 2), devices("neuron", 2), custom=1.0))
    take(alloc, {"custom": 0.5})
    before = alloc.available()
    assert alloc.acquire({"GPU": 2, "neuron_cores": 1, "custom": 0.6}) is None
    assert alloc.available() == before
    grant = take(alloc, {"GPU": 2, "neuron_cores": 1, "custom": 0.5})
    assert grant.ids == {"GPU": ["0", "1"], "neuron_cores": ["0"]}
    assert dict(grant.resources) == {"GPU": 2.0, "neuron_cores": 1.0, "custom": 0.5}


def test_partitions_are_whole_and_one_per_grant() -> None:
    mig = devices("nvidia", ids=["MIG-a", "MIG-b"], label="A100-1g.5gb", parent="GPU-x")
    node = make_node(mig + devices("nvidia", ids=["1"]))
    alloc = Allocator(node)
    assert take(alloc, {"GPU": 0.5}).ids["GPU"] == ["1"]  # a share never lands on a MIG slice
    assert take(alloc, {"GPU": 1}).ids["GPU"] == ["MIG-a"]
    with pytest.raises(Unsatisfiable, match="at most 1 per grant"):
        alloc.acquire({"GPU": 2}, accelerator_type="A100-1g.5gb")


def test_partitions_are_never_shared() -> None:
    mig = devices("nvidia", ids=["MIG-a", "MIG-b"], label="A100-1g.5gb", parent="GPU-x")
    alloc = Allocator(make_node(mig))
    with pytest.raises(Unsatisfiable, match="partitions are granted whole, at most 1 per grant"):
        alloc.acquire({"GPU": 0.5})
    with pytest.raises(Unsatisfiable, match="at most 1 per grant"):
        alloc.acquire({"GPU": 2})
    assert [take(alloc, {"GPU": 1}).ids["GPU"] for _ in range(2)] == [["MIG-a"], ["MIG-b"]]
    assert alloc.acquire({"GPU": 1}) is None


def test_a_family_may_schedule_partitions_as_ordinary_devices() -> None:
    cores = devices("neuron", 4, parent="neuron0")  # as the Neuron plugin names each core's device
    assert take(Allocator(make_node(cores)), {"neuron_cores": 3}).ids["neuron_cores"] == [
        "0",
        "1",
        "2",
    ]


def test_a_parent_beside_its_partitions_is_not_allocatable() -> None:
    parent = devices("nvidia", ids=["GPU-x"])
    mig = devices("nvidia", ids=["MIG-a"], parent="GPU-x")
    node = Node(devices=parent + mig, resources={"GPU": 1.0})
    alloc = Allocator(node)
    assert take(alloc, {"GPU": 1}).ids["GPU"] == ["MIG-a"]
    assert alloc.acquire({"GPU": 1}) is None


def test_plain_capacity_is_allocated_as_a_quantity() -> None:
    alloc = Allocator(make_node(custom=2.0))
    grants = [take(alloc, {"custom": 0.7}) for _ in range(2)]
    assert take(alloc, {"custom": 0.6}).devices == ()
    assert alloc.acquire({"custom": 0.0001}) is None
    with pytest.raises(Unsatisfiable):
        alloc.acquire({"custom": 3})
    alloc.release(grants[0])
    assert alloc.available() == {"custom": pytest.approx(0.7)}


# -- never vs not now --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "request_",
    [{"GPU": 3}, {"TPU": 1}, {"GPU": 1, "accelerator_type:T4": 0.001}, {"custom": 1.5 * 0 + 2}],
)
def test_unsatisfiable_when_an_idle_node_could_never_serve(request_: dict[str, object]) -> None:
    alloc = Allocator(make_node(devices("nvidia", 2, label="H100"), custom=1.0))
    with pytest.raises(Unsatisfiable):
        alloc.acquire(request_)


def test_none_when_it_would_fit_after_releases() -> None:
    alloc = Allocator(make_node(devices("nvidia", 2)))
    held = take(alloc, {"GPU": 2})
    assert alloc.acquire({"GPU": 1}) is None
    assert alloc.acquire({"GPU": 0.5}) is None
    alloc.release(held)
    assert take(alloc, {"GPU": 2})


def test_invalid_requests_raise_from_acquire_too() -> None:
    alloc = Allocator(make_node(devices("nvidia", 3)))
    take(alloc, {"GPU": 1})  # a cached shape must not let a bool through as 1
    take(alloc, {"GPU": 1.0})  # nor 1.00005, which floors to the same units but is not whole
    for bad in ({"GPU": True}, {"GPU": 1.00005}, {"GPU": 1.5}, {"GPU": [1]}, "GPU", {"GPU": "1"}):
        with pytest.raises(InvalidRequest):
            alloc.acquire(bad)  # type: ignore[arg-type]
    assert alloc.available() == {"GPU": 1.0}


def test_exact_numbers_are_quantities_too() -> None:
    alloc = Allocator(make_node(devices("nvidia", 1)))
    grants = [take(alloc, {"GPU": q}) for q in (Decimal("0.5"), Fraction(1, 4), 0.25)]
    assert [dict(g.resources) for g in grants] == [{"GPU": 0.5}, {"GPU": 0.25}, {"GPU": 0.25}]
    assert alloc.available() == {"GPU": 0.0}


# -- release and restore -----------------------------------------------------------------------
def test_release_twice_or_foreign_changes_nothing() -> None:
    node = make_node(devices("nvidia", 2))
    alloc, other = Allocator(node), Allocator(node)
    grant = take(alloc, {"GPU": 0.5})
    stranger = take(other, {"GPU": 0.5})
    alloc.release(grant)
    before = alloc.available()
    for bad in (grant, stranger):
        with pytest.raises(InvalidRequest, match="not held from this allocator"):
            alloc.release(bad)
        assert alloc.available() == before
    forged = Grant(take(alloc, {"GPU": 0.5}).token, {"GPU": 1.0}, ())
    with pytest.raises(InvalidRequest):
        alloc.release(forged)


def test_a_copy_of_a_grant_releases_it() -> None:
    alloc = Allocator(make_node(devices("nvidia", 1)))
    grant = take(alloc, {"GPU": 0.5})
    alloc.release(Grant.from_dict(json.loads(json.dumps(grant.to_dict()))))
    assert alloc.available() == {"GPU": 1.0}
    assert alloc.grants() == []


def test_restore_rebuilds_state_after_a_restart() -> None:
    node = make_node(devices("nvidia", 3, label="H100"), custom=1.0)
    before = Allocator(node)
    held = [
        take(before, {"GPU": 0.5}),
        take(before, {"GPU": 1, "custom": 0.25}, accelerator_type="H100"),
        take(before, {"GPU": 1 / 3}),
    ]
    saved = json.dumps([g.to_dict() for g in before.grants()])

    after = Allocator(Node.from_dict(json.loads(json.dumps(node.to_dict()))))
    after.restore(json.loads(saved))
    assert after.available() == before.available()
    assert sorted(g.token for g in after.grants()) == sorted(g.token for g in held)
    # The next grants land where they would have before the restart.
    assert take(after, {"GPU": 0.5}).ids == take(before, {"GPU": 0.5}).ids
    for grant in held:
        after.release(grant)


@pytest.mark.parametrize(
    "tamper",
    [
        lambda d: d["devices"][0]["device"].update(id="7"),  # a device the node lacks
        lambda d: d["resources"].update(GPU=0.75),  # shares do not add up
        lambda d: d["resources"].update(TPU=1.0),  # a resource the node lacks
        lambda d: d["devices"][0].update(share=1.5),
    ],
)
def test_restore_rejects_grants_that_do_not_match_the_node(tamper: object) -> None:
    node = make_node(devices("nvidia", 2))
    data = take(Allocator(node), {"GPU": 0.5}).to_dict()
    tamper(data)  # type: ignore[operator]
    alloc = Allocator(node)
    with pytest.raises(InvalidRequest):
        alloc.restore([data])
    assert alloc.available() == {"GPU": 2.0}


@pytest.mark.parametrize("fact", ["uuid", "pci_bus_id"])
def test_restore_refuses_a_grant_of_another_device_under_the_same_id(fact: str) -> None:
    """Persisted grants restored after the node changed (GPUs swapped or renumbered by a
    reboot) matched the node by id alone: GPU 0 of the grant, another card than this node's
    GPU 0, was held while a job ran on the card that had moved."""
    facts = {"uuid": ("GPU-aaaa", "GPU-bbbb"), "pci_bus_id": ("0000:17:00.0", "0000:3a:00.0")}
    then, now = facts[fact]

    def with_gpu0(value: str) -> Node:
        gpus = devices("nvidia", 2)
        return make_node([dataclasses.replace(gpus[0], **{fact: value}), gpus[1]])

    node = with_gpu0(then)
    data = take(Allocator(node), {"GPU": 1}).to_dict()
    moved = with_gpu0(now)
    alloc = Allocator(moved)
    with pytest.raises(
        InvalidRequest,
        match=f"holds nvidia:0 with {fact} {then}, but this node's nvidia:0 has {now}",
    ):
        alloc.restore([data])
    assert alloc.available() == {"GPU": 2.0}
    Allocator(node).restore([data])  # the same node: restored


def test_restore_refuses_what_is_not_a_grant_as_an_invalid_request() -> None:
    alloc = Allocator(make_node(devices("nvidia", 1)))
    with pytest.raises(InvalidRequest, match="cannot restore"):
        alloc.restore([{"token": "x", "resources": {}, "devices": []}])
    assert alloc.available() == {"GPU": 1.0}


def test_restore_is_all_or_nothing() -> None:
    node = make_node(devices("nvidia", 1))
    source = Allocator(node)
    first = take(source, {"GPU": 0.75})
    source.release(first)
    second = take(source, {"GPU": 0.5})
    alloc = Allocator(node)
    with pytest.raises(InvalidRequest, match="only 1 is free"):
        alloc.restore([first, second])  # 1.25 of one GPU
    assert alloc.available() == {"GPU": 1.0}
    alloc.restore([second])
    with pytest.raises(InvalidRequest, match="held already"):
        alloc.restore([second])


# -- state ------------------------------------------------------------------------------------
def test_available_has_the_node_resource_keys() -> None:
    node = make_node(devices("nvidia", 2, label="H100"), devices("tpu", 4), custom=3.0)
    alloc = Allocator(node)
    assert list(alloc.available()) == list(node.resources)
    take(alloc, {"GPU": 0.25, "TPU": 2, "custom": 1}, accelerator_type="H100")
    assert alloc.available() == {
        "GPU": 1.75,
        "TPU": 2.0,
        "accelerator_type:H100": 0.999,
        "custom": 2.0,
    }


def test_a_hand_built_node_without_resources_still_counts_its_devices() -> None:
    alloc = Allocator(Node(devices=devices("nvidia", 2)))
    assert alloc.available() == {"GPU": 2.0}
    assert take(alloc, {"GPU": 2}).ids["GPU"] == ["0", "1"]


def test_works_on_a_node_rebuilt_from_json() -> None:
    node = make_node(devices("tpu", 8, label="TPU-V6E"))
    rebuilt = Node.from_dict(json.loads(json.dumps(node.to_dict())))
    alloc = Allocator(rebuilt)
    assert take(alloc, {"TPU": 4}, accelerator_type="TPU-V6E").ids["TPU"] == ["0", "1", "2", "3"]
    assert repr(alloc).startswith("<Allocator 1 grant(s) held")


def test_a_node_listing_one_device_id_twice_is_refused() -> None:
    # Node.from_dict refuses it; a node built by hand reached the allocator, which granted
    # device "0" to two requests, both written CUDA_VISIBLE_DEVICES=0.
    twice = make_node(devices("nvidia", 1) * 2)
    with pytest.raises(ConfigurationError, match=r"nvidia device id\(s\) '0' twice"):
        Allocator(twice)
    spelt_twice = [*devices("nvidia", 1), dataclasses.replace(devices("nvidia", 1)[0], id="00")]
    with pytest.raises(ConfigurationError, match="two spellings of one index"):
        Allocator(make_node(spelt_twice))
