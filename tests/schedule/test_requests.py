"""validate_request: the fixed-point rule, each family's rule, types, and what a node can serve."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from accelkit import InvalidRequest, Unsatisfiable, validate_request
from accelkit.errors import ConfigurationError
from accelkit.node._record import Node
from sched_nodes import devices, make_node


@pytest.mark.parametrize(
    ("quantity", "units"),
    [
        (0.57, 5700),  # 0.57 * 1e4 is 5699.999...: within 1e-9 of a unit, so it rounds
        (1 / 3, 3333),  # floored, as Ray does, and valid
        (Fraction(1, 3), 3333),
        (0.1, 1000),
        (0.0001, 1),
        (0.99999, 9999),  # floored: 1e-5 is not within 1e-9 of a unit
        (1 - 1e-12, 10000),  # within 1e-9 of 1: rounds up
        (1, 10000),
        (2, 20000),
        (2.0, 20000),
        (8, 80000),
    ],
)
def test_quantities_are_fixed_point_units(quantity: object, units: int) -> None:
    assert validate_request({"GPU": quantity}) == {"GPU": units}


@pytest.mark.parametrize(
    ("quantity", "message"),
    [
        (0.00005, "below the smallest quantity"),
        (-0.5, "must not be negative"),
        (math.nan, "finite"),
        (math.inf, "finite"),
        ("0.5", "must be a number"),
        (None, "must be a number"),
        (True, "must be a number"),
        (1.5, "above 1 and not whole"),
        (2.25, "above 1 and not whole"),
    ],
)
def test_bad_quantities_are_rejected_with_the_value(quantity: object, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message) as raised:
        validate_request({"GPU": quantity})
    assert repr(quantity) in str(raised.value)


def test_zero_quantities_ask_for_nothing() -> None:
    assert validate_request({"GPU": 0, "TPU": 0.0, "custom": 0}) == {}
    assert validate_request({}) == {}


@pytest.mark.parametrize(
    ("request_", "units"),
    [
        ({"GPU": 0.25}, {"GPU": 2500}),
        ({"NPU": 0.25}, {"NPU": 2500}),
        ({"neuron_cores": 3}, {"neuron_cores": 30000}),
        ({"TPU": 1}, {"TPU": 10000}),
        ({"TPU": 4}, {"TPU": 40000}),
        ({"TPU": 8}, {"TPU": 80000}),
        ({"HPU": 2}, {"HPU": 20000}),
        ({"custom": 0.5, "memory": 1e9}, {"custom": 5000, "memory": 10**13}),
    ],
)
def test_each_family_rule_accepts(request_: dict[str, object], units: dict[str, int]) -> None:
    assert validate_request(request_) == units


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        ({"neuron_cores": 0.5}, "fractional, but neuron devices are granted whole"),
        ({"TPU": 0.5}, "fractional, but tpu devices are granted whole"),
        ({"TPU": 3}, r"not allowed: ask for 1, 2, 4, 8"),
        ({"TPU": 16}, r"not allowed"),
        ({"HPU": 0.5}, "fractional"),
        ({"HPU": 6}, r"not allowed: ask for 1, 2, 4, 8"),
    ],
)
def test_each_family_rule_rejects(request_: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        validate_request(request_)


@pytest.mark.parametrize(
    "request_",
    ["GPU", ["GPU", 1], None, {1: 1}, {"": 1}, {"G PU": 1}, {"accelerator_type:": 0.001}],
)
def test_malformed_requests(request_: object) -> None:
    with pytest.raises(InvalidRequest):
        validate_request(request_)  # type: ignore[arg-type]


def test_type_requests_ask_a_thousandth_of_the_type_resource() -> None:
    keyword = validate_request({"GPU": 1}, accelerator_type="H100")
    key = validate_request({"GPU": 1, "accelerator_type:H100": 0.001})
    assert keyword == key == {"GPU": 10000, "accelerator_type:H100": 10}
    both = validate_request({"GPU": 1, "accelerator_type:H100": 0.5}, accelerator_type="H100")
    assert both == {"GPU": 10000, "accelerator_type:H100": 5000}


@pytest.mark.parametrize(
    ("request_", "accelerator_type"),
    [
        ({"GPU": 1, "accelerator_type:H100": 0.001}, "T4"),
        ({"GPU": 1, "accelerator_type:H100": 0.001, "accelerator_type:T4": 0.001}, None),
        ({"GPU": 1}, ""),
        ({"GPU": 1}, "H 100"),
    ],
)
def test_one_well_formed_type_per_request(
    request_: dict[str, object], accelerator_type: str | None
) -> None:
    with pytest.raises(InvalidRequest):
        validate_request(request_, accelerator_type=accelerator_type)


# -- against a node ----------------------------------------------------------------------------
def h100_node() -> Node:
    return make_node(devices("nvidia", 2, label="H100"), custom=2.0)


def test_unknown_resources_name_the_known_ones() -> None:
    with pytest.raises(Unsatisfiable, match=r"no resource 'TPU'.*'GPU'.*'custom'"):
        validate_request({"TPU": 1}, h100_node())


def test_unknown_types_name_the_known_ones() -> None:
    for kwargs in ({"accelerator_type": "T4"}, {}):
        request = {"GPU": 1} if kwargs else {"GPU": 1, "accelerator_type:T4": 0.001}
        with pytest.raises(Unsatisfiable, match=r"no 'T4' accelerators; its types are \['H100'\]"):
            validate_request(request, h100_node(), **kwargs)


def test_a_hand_built_node_without_its_type_resource_is_told_what_to_add() -> None:
    """A node built by hand with H100 devices and no ``accelerator_type:H100`` resource was
    told "its types are none", while its devices said H100."""
    node = Node(devices=devices("nvidia", 2, label="H100"), resources={"GPU": 2.0})
    with pytest.raises(Unsatisfiable, match=r"has 'H100' devices but no resource "):
        validate_request({"GPU": 1}, node, accelerator_type="H100")


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        ({"GPU": 3}, r"needs 3 devices and nvidia has 2 that may serve it \(0, 1\)"),
        ({"custom": 3}, r"custom 3 is more than this node's 2"),
        ({"accelerator_type:H100": 1, "GPU": 0.5}, None),
    ],
)
def test_never_fitting_requests_are_unsatisfiable(
    request_: dict[str, object], message: str | None
) -> None:
    if message is None:
        assert validate_request(request_, h100_node()) == {
            "accelerator_type:H100": 10000,
            "GPU": 5000,
        }
        return
    with pytest.raises(Unsatisfiable, match=message):
        validate_request(request_, h100_node())


def test_a_type_lands_only_on_its_own_devices() -> None:
    node = make_node(
        devices("nvidia", ids=["0", "1"], label="T4") + devices("nvidia", ids=["2"], label="A100")
    )
    assert validate_request({"GPU": 2}, node, accelerator_type="T4") == {
        "GPU": 20000,
        "accelerator_type:T4": 10,
    }
    with pytest.raises(Unsatisfiable, match="needs 2 devices and nvidia has 1 that may serve it"):
        validate_request({"GPU": 2}, node, accelerator_type="A100")


def test_a_typed_resource_without_devices_of_that_type() -> None:
    node = make_node(devices("nvidia", 1, label="H100"), devices("tpu", 1, label="TPU-V6E"))
    with pytest.raises(Unsatisfiable, match=r"no GPU device on this node has that type"):
        validate_request({"GPU": 1}, node, accelerator_type="TPU-V6E")


@pytest.mark.parametrize(
    ("family", "ids", "request_", "message"),
    [
        ("tpu", ["0", "1", "3"], {"TPU": 2}, None),
        ("tpu", ["1", "2"], {"TPU": 2}, r"aligned block.*1, 2 never form"),
        ("gaudi", ["0", "1", "2", "5"], {"HPU": 4}, r"aligned block"),
        ("neuron", ["0", "1", "3"], {"neuron_cores": 2}, None),
        ("neuron", ["0", "1", "3"], {"neuron_cores": 3}, r"contiguous range"),
    ],
)
def test_placement_that_can_never_form(
    family: str, ids: list[str], request_: dict[str, object], message: str | None
) -> None:
    node = make_node(devices(family, ids=ids))
    if message is None:
        assert validate_request(request_, node)
    else:
        with pytest.raises(Unsatisfiable, match=message):
            validate_request(request_, node)


def test_node_rules_beat_other_families_of_the_same_resource() -> None:
    node = make_node(devices("nvidia", 1))
    assert validate_request({"GPU": 0.5}, node) == {"GPU": 5000}
    with pytest.raises(Unsatisfiable, match="nvidia has 1"):
        validate_request({"GPU": 2}, node)


def test_zero_of_a_missing_resource_is_fine_on_a_node() -> None:
    assert validate_request({"GPU": 0, "TPU": 0}, make_node()) == {}


def test_inconsistent_nodes_are_configuration_errors() -> None:
    wrong_count = Node(devices=devices("nvidia", 2), resources={"GPU": 3.0})
    with pytest.raises(ConfigurationError, match=r"GPU=3.0 disagrees with its 2"):
        validate_request({"GPU": 1}, wrong_count)
    from accelkit import Device

    no_family = Node(devices=[Device(id="0")], resources={"GPU": 1.0})
    with pytest.raises(ConfigurationError, match="has no family"):
        validate_request({"GPU": 1}, no_family)
    unknown_family = Node(devices=[Device(id="0", family="warp", resource_name="W")])
    with pytest.raises(ConfigurationError, match="no warp plugin is loaded"):
        validate_request({"W": 1}, unknown_family)


def test_the_type_keyword_may_be_written_into_the_request() -> None:
    expected = {"GPU": 10000, "accelerator_type:H100": 10}
    assert validate_request({"GPU": 1, "accelerator_type": "H100"}) == expected
    assert validate_request({"GPU": 1, "accelerator_type": "H100"}, accelerator_type="H100") == (
        expected
    )
    assert validate_request({"GPU": 1, "accelerator_type": "H100"}, h100_node()) == expected
    with pytest.raises(InvalidRequest, match="one accelerator type"):
        validate_request({"GPU": 1, "accelerator_type": "H100"}, accelerator_type="T4")
    with pytest.raises(InvalidRequest, match=r"takes a label, got 1.*accelerator_type:H100"):
        validate_request({"GPU": 1, "accelerator_type": 1})


def test_errors_say_what_would_be_right() -> None:
    with pytest.raises(InvalidRequest, match=r"-1.*must not be negative: ask for 0"):
        validate_request({"GPU": -1})
    with pytest.raises(InvalidRequest, match=r"TPU quantity 3 is not allowed: ask for 1, 2, 4, 8"):
        validate_request({"TPU": 3})
    with pytest.raises(InvalidRequest, match=r"neuron_cores quantity 0.5.*ask for any whole"):
        validate_request({"neuron_cores": 0.5})
