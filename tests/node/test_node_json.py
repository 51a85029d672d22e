"""Node.to_dict / from_dict: lossless, JSON-ready, versioned."""

from __future__ import annotations

import json

import pytest
from accelkit.device import Device
from accelkit.diagnostics import LEVELS, Diagnostic
from accelkit.node._record import SCHEMA_VERSION, Node
from hypothesis import given
from hypothesis import strategies as st

token = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters=" ,\t\n\r\x0b\x0c"),
    min_size=1,
    max_size=12,
).filter(lambda s: not any(c.isspace() for c in s))
maybe_text = st.none() | st.text(max_size=20)
devices = st.builds(
    Device,
    id=token,
    index=st.none() | st.integers(min_value=0, max_value=1 << 20),
    family=st.sampled_from(["nvidia", "amd", "tpu", "acme"]),
    resource_name=st.sampled_from(["GPU", "TPU", "neuron_cores"]),
    type_label=maybe_text,
    model=maybe_text,
    uuid=maybe_text,
    memory_bytes=st.none() | st.integers(min_value=0, max_value=1 << 50),
    pci_bus_id=maybe_text,
    numa_node=st.none() | st.integers(min_value=-1, max_value=16),
    parent=st.none() | token,
    source=st.sampled_from(["library", "command", "sysfs", "devfs", "override", ""]),
)
nodes = st.builds(
    Node,
    devices=st.lists(devices, max_size=6, unique_by=lambda d: (d.family, d.id)),
    resources=st.dictionaries(
        st.text(min_size=1, max_size=16),
        st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False),
        max_size=5,
    ),
    labels=st.dictionaries(st.text(min_size=1, max_size=16), st.text(max_size=16), max_size=5),
    diagnostics=st.lists(
        st.builds(Diagnostic, st.text(max_size=8), st.sampled_from(LEVELS), st.text(max_size=30)),
        max_size=4,
    ),
)


@given(nodes)
def test_to_dict_from_dict_is_lossless_also_through_json(node: Node) -> None:
    data = node.to_dict()
    assert data["schema_version"] == SCHEMA_VERSION
    assert Node.from_dict(data) == node
    assert Node.from_dict(json.loads(json.dumps(data))) == node
    assert Node.from_dict(data).to_dict() == data


def test_from_dict_refuses_other_schema_versions_and_unknown_fields() -> None:
    with pytest.raises(ValueError, match="schema_version 2 is not supported"):
        Node.from_dict({"schema_version": 2})
    with pytest.raises(ValueError, match="schema_version None"):
        Node.from_dict({})
    data = Node(devices=[Device("0")]).to_dict()
    data["devices"][0]["colour"] = "green"
    with pytest.raises(ValueError, match="a device has unknown keys"):
        Node.from_dict(data)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "a node must be a JSON object"),
        ({"schema_version": 1, "device": []}, r"a node has unknown keys \[.device.\]"),
        (
            {"schema_version": 1, "diagnostics": [{"family": "x"}]},
            "a diagnostic (must be a JSON object|lacks the keys)",
        ),
        (
            {"schema_version": 1, "diagnostics": [["x", "info", "m"]]},
            "a diagnostic (must be a JSON object|lacks the keys)",
        ),
        ({"schema_version": 1, "resources": {"GPU": None}}, "malformed node"),
        ({"schema_version": 1, "devices": ["0"]}, "a device must be a JSON object"),
    ],
)
def test_from_dict_says_what_is_wrong_with_a_malformed_node(data: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Node.from_dict(data)  # type: ignore[arg-type]


@pytest.mark.parametrize("second", ["0", "00"])
def test_from_dict_refuses_one_device_listed_twice_in_a_family(second: str) -> None:
    # "00" is GPU 0 to CUDA, HIP and every runtime that reads indices
    devices = [Device("0", family="nvidia"), Device(second, family="nvidia")]
    data = Node(devices=devices).to_dict()
    with pytest.raises(ValueError, match=rf"nvidia lists device id '{second}' twice"):
        Node.from_dict(data)
    apart = Node(devices=[Device("0", family="nvidia"), Device(second, family="amd")]).to_dict()
    assert len(Node.from_dict(apart).devices) == 2  # one id in two families is two devices
