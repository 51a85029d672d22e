"""Node detection on inputs a fuzzer found: each test failed before its fix.

A "nothing visible" marker among ids, a plugin's type label with a space, and a third-party
family whose visibility tokens name partitions by index: each left a node that no request could
use (a device named ``NoDevFiles``, a resource no request can name, an allocator that refuses
the node).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from accelkit import Allocator, Registry, validate_request
from accelkit.device import Device
from accelkit.exports import to_dask, to_ray
from accelkit.host import FakeHost
from accelkit.node._detect import detect_node
from accelkit.node._record import Node
from accelkit_plugins.gaudi import testing as fake_gaudi
from accelkit_plugins.tpu import testing as fake_tpu
from core_fakes import Provides, static_manager
from hypothesis import given, settings
from hypothesis import strategies as st

BUILTINS = Registry(autoload=False)


def warnings_of(node: Node) -> list[str]:
    return [d.message for d in node.diagnostics if d.level == "warning"]


# -- a "nothing visible" marker among ids -------------------------------------------------------
@pytest.mark.parametrize("variable", ["TPU_VISIBLE_CHIPS", "HABANA_VISIBLE_MODULES"])
@pytest.mark.parametrize("value", ["NoDevFiles,0", "0, NoDevFiles", " NoDevFiles , 0,1"])
def test_the_marker_among_ids_never_becomes_a_device(variable: str, value: str) -> None:
    node = detect_node(FakeHost(env={variable: value}), registry=BUILTINS)
    assert "NoDevFiles" not in [d.id for d in node.devices]
    before = value.split("NoDevFiles")[0]
    assert [d.id for d in node.devices] == [t.strip() for t in before.split(",") if t.strip()]
    assert any("'NoDevFiles'" in w and "among ids" in w for w in warnings_of(node)), node


def tpu_host(root: Path, env: dict[str, str]) -> FakeHost:
    return fake_tpu.make_host(4, root, env)


def gaudi_host(root: Path, env: dict[str, str]) -> FakeHost:
    cards = fake_gaudi.fake_cards(4)
    fake_gaudi.write_sysfs(root, cards)
    output = fake_gaudi.hl_smi_output(cards)
    return FakeHost(root=root, env=env, commands={fake_gaudi.HL_SMI_ARGV: (0, output)})


@pytest.mark.parametrize(
    ("family", "variable", "host"),
    [("tpu", "TPU_VISIBLE_CHIPS", tpu_host), ("gaudi", "HABANA_VISIBLE_MODULES", gaudi_host)],
)
def test_the_marker_among_ids_ends_the_list_on_detected_devices(
    family: str, variable: str, host: Callable[[Path, dict[str, str]], FakeHost], tmp_path: Path
) -> None:
    node = detect_node(host(tmp_path, {variable: "1,NoDevFiles,2"}), registry=BUILTINS)
    assert [d.id for d in node.devices if d.family == family] == ["1"]
    assert any("among ids" in w for w in warnings_of(node)), node
    Allocator(node, registry=BUILTINS)  # the node is usable


# -- a type label with a space -------------------------------------------------------------------
def label_registry(label: str) -> Registry:
    manager = static_manager(
        "acme", "ACME", [Device("0", type_label=label), Device("1", type_label=label)]
    )
    return Registry([Provides([manager])], autoload=False)


@pytest.mark.parametrize(
    ("label", "safe"),
    [("Acme X1", "Acme-X1"), ("Acme\tX1 ", "Acme-X1"), ("X1=fast,cheap", "X1-fast-cheap")],
)
def test_a_type_label_a_request_cannot_name_is_made_one_it_can(label: str, safe: str) -> None:
    registry = label_registry(label)
    node = detect_node(FakeHost(), registry=registry)
    assert {d.type_label for d in node.devices} == {safe}
    assert node.resources == {"ACME": 2.0, f"accelerator_type:{safe}": 1.0}
    assert node.labels["accelkit/acme.type"] == safe
    assert any(repr(label) in w and repr(safe) in w for w in warnings_of(node)), node
    validate_request({"ACME": 1, f"accelerator_type:{safe}": 0.001}, registry=registry)
    grant = Allocator(node, registry=registry).acquire({"ACME": 1}, accelerator_type=safe)
    assert grant is not None
    assert f'"accelerator_type:{safe}":1' in " ".join(to_ray(node))
    assert f"accelerator_type:{safe}=1" in to_dask(node)


def test_a_label_with_nothing_usable_is_dropped_with_a_warning() -> None:
    node = detect_node(FakeHost(), registry=label_registry(" ,= "))
    assert {d.type_label for d in node.devices} == {None}
    assert node.resources == {"ACME": 2.0}
    assert any("' ,= '" in w for w in warnings_of(node)), node


def test_a_resource_safe_label_is_kept_as_it_is() -> None:
    node = detect_node(FakeHost(), registry=label_registry("A100-1g.10gb+me"))
    assert {d.type_label for d in node.devices} == {"A100-1g.10gb+me"}
    assert warnings_of(node) == []


# -- partitions named by index tokens ------------------------------------------------------------
def partitioned(devices: list[Device], value: str) -> tuple[Node, Registry]:
    manager = static_manager("zeta", "ZPU", devices, visible_devices_env_var="ZETA_VISIBLE")
    registry = Registry([Provides([manager])], autoload=False)
    return detect_node(FakeHost(env={"ZETA_VISIBLE": value}), registry=registry), registry


CARDS = [
    Device("a", parent="0"),
    Device("b", parent="0"),
    Device("0"),
    Device("c", parent="1"),
    Device("d", parent="1"),
    Device("1"),
]
"""Two cards, each listed after its two partitions: index tokens 0-5 name the devices in order."""


@pytest.mark.parametrize("value", ["0,3", "1,3", "3,1", "1,4"])
def test_index_tokens_never_name_a_partition_as_another_ones_parent(value: str) -> None:
    node, registry = partitioned(CARDS, value)
    parents = {d.parent for d in node.devices if d.parent}
    assert not parents & {d.id for d in node.devices}, node.devices
    alloc = Allocator(node, registry=registry)  # refused the whole node before
    assert alloc.available() == node.resources
    assert any("partitions are listed in its place" in w for w in warnings_of(node)), node


@st.composite
def cards_and_tokens(draw: st.DrawFn) -> tuple[list[Device], str]:
    """Cards, some listed with their partitions (before or after the card), and a visibility
    value of index tokens and ids."""
    devices: list[Device] = []
    for card in range(draw(st.integers(1, 3))):
        parts = [Device(f"p{card}.{n}", parent=str(card)) for n in range(draw(st.integers(0, 3)))]
        whole = Device(str(card))
        devices += [*parts, whole] if draw(st.booleans()) else [whole, *parts]
    names = [*(str(n) for n in range(len(devices) + 2)), *(d.id for d in devices)]
    tokens = draw(st.lists(st.sampled_from(names), min_size=1, max_size=5, unique=True))
    return devices, ",".join(tokens)


@settings(max_examples=60, deadline=None)
@given(cards_and_tokens())
def test_a_node_restricted_by_any_tokens_can_be_allocated(case: tuple[list[Device], str]) -> None:
    node, registry = partitioned(*case)
    parents = {d.parent for d in node.devices if d.parent}
    assert not parents & {d.id for d in node.devices}, node.devices
    Allocator(node, registry=registry)


# -- devices the runtime counts but the node does not offer --------------------------------------
@st.composite
def offered_and_tokens(draw: st.DrawFn) -> tuple[list[Device], list[str]]:
    """Devices ``d0``.. (some not offered), and visibility tokens naming them by id or by index,
    or naming nothing."""
    flags = draw(st.lists(st.booleans(), min_size=1, max_size=5))
    devices = [Device(f"d{n}", uuid=f"U{n}", offered=flag) for n, flag in enumerate(flags)]
    names = [*(str(n) for n in range(len(devices) + 2)), *(d.id for d in devices)]
    return devices, draw(st.lists(st.sampled_from(names), min_size=1, max_size=6, unique=True))


def read_as_the_runtime_does(
    devices: list[Device], tokens: list[str]
) -> list[tuple[str, str, int]]:
    """(token, uuid, ordinal) of each device the runtime shows: it counts every device a token
    names, offered or not, and stops at the first token naming none."""
    shown: list[tuple[str, str, int]] = []
    ordinal, taken = 0, set()
    for token in tokens:
        named = [d for n, d in enumerate(devices) if token in (d.id, str(n))]
        if not named:
            break
        device = named[0]
        if device.id in taken:
            continue  # named twice: kept once, counted once
        taken.add(device.id)
        if device.offered:
            shown.append((token, str(device.uuid), ordinal))
        ordinal += 1
    return shown


@settings(max_examples=80, deadline=None)
@given(offered_and_tokens())
def test_a_visibility_list_reads_past_devices_not_offered(
    case: tuple[list[Device], list[str]],
) -> None:
    devices, tokens = case
    manager = static_manager("chip", "CHIP", devices, visible_devices_env_var="CHIP_VISIBLE")
    registry = Registry([Provides([manager])], autoload=False)
    node = detect_node(FakeHost(env={"CHIP_VISIBLE": ",".join(tokens)}), registry=registry)
    shown = [(d.id, str(d.uuid), d.index) for d in node.devices]
    assert shown == read_as_the_runtime_does(devices, tokens)
    assert node.detected == {"chip": len(devices)}
    Allocator(node, registry=registry)
