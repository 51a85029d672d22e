"""The Intel GPU plugin: its data sheet, stacks, integrated GPUs, each layer, fakes and snapshot."""

from __future__ import annotations

import json
import os
import pathlib
from typing import Any, Callable, Optional

import accelkit
import pytest
from accelkit.host import load_snapshot
from accelkit.registry import contract_errors, variables_read
from accelkit_plugins.intel import IntelManager, dpctl_probe
from accelkit_plugins.intel import testing as fake
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SNAPSHOT = pathlib.Path(__file__).parents[2] / "examples" / "nodes" / "intel-max1550-4gpu"
MANAGER = IntelManager()
GIB = 1 << 30


def host_with(
    tmp_path: pathlib.Path,
    cards: list[fake.FakeCard],
    *,
    xpu_smi: Any = None,
    dpctl: Any = None,
    env: Optional[dict[str, str]] = None,
    sysfs: bool = True,
) -> accelkit.FakeHost:
    if sysfs:
        fake.write_sysfs(tmp_path, cards)
    commands = {} if xpu_smi is None else {fake.XPU_SMI_ARGV: xpu_smi}
    modules = {} if dpctl is None else {"dpctl": dpctl}
    return accelkit.FakeHost(root=tmp_path, env=env, commands=commands, modules=modules)


# -- part 1: the data sheet --------------------------------------------------------------------
def test_declares_the_intel_family() -> None:
    assert contract_errors(MANAGER) == []
    assert (MANAGER.name, MANAGER.resource_name) == ("intel", "GPU")
    assert MANAGER.visible_devices_env_var == "ONEAPI_DEVICE_SELECTOR"
    assert set(variables_read(MANAGER)) == {
        "ONEAPI_DEVICE_SELECTOR",
        "ZE_AFFINITY_MASK",
        "ZE_FLAT_DEVICE_HIERARCHY",
        "ZE_ENABLE_PCI_ID_DEVICE_ORDER",
    }
    assert (MANAGER.frameworks.device, MANAGER.frameworks.collective) == ("xpu", "xccl")
    assert MANAGER.validate_quantity(0.5) == 5000


def test_writes_the_level_zero_selector_in_pci_order_and_unsets_the_mask() -> None:
    assert MANAGER.visibility_env(["0", "3"]) == {
        "ONEAPI_DEVICE_SELECTOR": "level_zero:0,3",
        "ZE_AFFINITY_MASK": None,
        "ZE_ENABLE_PCI_ID_DEVICE_ORDER": "1",
    }
    assert MANAGER.visibility_env([" 1 "])["ONEAPI_DEVICE_SELECTOR"] == "level_zero:1"


def test_hiding_every_device_writes_a_discard_filter_that_reads_back_as_nothing() -> None:
    env = MANAGER.visibility_env([])
    assert env == {
        "ONEAPI_DEVICE_SELECTOR": "!level_zero:*;!opencl:gpu",  # OpenCL GPUs hidden too
        "ZE_AFFINITY_MASK": None,
        "ZE_ENABLE_PCI_ID_DEVICE_ORDER": "1",
    }
    assert MANAGER.read_visible({"ONEAPI_DEVICE_SELECTOR": "!level_zero:*;!opencl:gpu"}) == []
    assert MANAGER.read_visible({"ONEAPI_DEVICE_SELECTOR": "!level_zero:*"}) == []


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, None),
        # SYCL and the unified runtime read an empty selector as accepting everything
        ({"ONEAPI_DEVICE_SELECTOR": ""}, None),
        ({"ONEAPI_DEVICE_SELECTOR": "NoDevFiles"}, []),
        ({"ONEAPI_DEVICE_SELECTOR": "level_zero:0,1"}, ["0", "1"]),
        ({"ONEAPI_DEVICE_SELECTOR": " level_zero: 2 , 3 "}, ["2", "3"]),
        ({"ONEAPI_DEVICE_SELECTOR": "0,1"}, ["0", "1"]),  # a bare list is accepted on read
        ({"ONEAPI_DEVICE_SELECTOR": "level_zero:"}, []),
        ({"ONEAPI_DEVICE_SELECTOR": "level_zero:*"}, None),
        ({"ONEAPI_DEVICE_SELECTOR": "*:gpu"}, None),
        ({"ONEAPI_DEVICE_SELECTOR": "opencl:0"}, []),
        ({"ONEAPI_DEVICE_SELECTOR": "level_zero:1;opencl:*"}, ["1"]),
        ({"ZE_AFFINITY_MASK": "2,3"}, ["2", "3"]),
        ({"ZE_AFFINITY_MASK": ""}, None),  # parseAffinityMask: an empty mask is no mask
        # Level Zero lists what the mask enables in its own order, each device once
        ({"ZE_AFFINITY_MASK": "3,2"}, ["2", "3"]),
        ({"ZE_AFFINITY_MASK": "1,0,1,01"}, ["0", "1"]),
        ({"ZE_AFFINITY_MASK": "3,2", "ONEAPI_DEVICE_SELECTOR": "level_zero:0"}, ["2"]),
        # the selector's indices are relative to the mask's list
        ({"ZE_AFFINITY_MASK": "4,5,6", "ONEAPI_DEVICE_SELECTOR": "level_zero:1"}, ["5"]),
        ({"ZE_AFFINITY_MASK": "4,5,6", "ONEAPI_DEVICE_SELECTOR": "2,0"}, ["6", "4"]),
        ({"ZE_AFFINITY_MASK": "4", "ONEAPI_DEVICE_SELECTOR": "level_zero:3"}, []),
        ({"ZE_AFFINITY_MASK": "4,5", "ONEAPI_DEVICE_SELECTOR": "level_zero:*"}, ["4", "5"]),
        ({"ZE_FLAT_DEVICE_HIERARCHY": "COMPOSITE"}, None),
        # stacks are root devices (FLAT, the default, and COMBINED): Level Zero skips card.stack
        ({"ZE_AFFINITY_MASK": "0.1,1"}, ["1"]),
        ({"ZE_AFFINITY_MASK": "0.0,2", "ZE_FLAT_DEVICE_HIERARCHY": "COMBINED"}, ["2"]),
        ({"ZE_AFFINITY_MASK": "0.1,1", "ONEAPI_DEVICE_SELECTOR": "level_zero:0"}, ["1"]),
        ({"ZE_AFFINITY_MASK": "0.1"}, []),
        # cards are root devices: card.stack shows its card with one stack, not offered, in its
        # place among the mask's cards, which the selector counts (level_zero:0 is card 0 there)
        ({"ZE_AFFINITY_MASK": "0.1,1", "ZE_FLAT_DEVICE_HIERARCHY": "COMPOSITE"}, ["1"]),
        (
            {
                "ZE_AFFINITY_MASK": "0.0,1",
                "ZE_FLAT_DEVICE_HIERARCHY": "COMPOSITE",
                "ONEAPI_DEVICE_SELECTOR": "level_zero:0",
            },
            [],
        ),
        (
            {
                "ZE_AFFINITY_MASK": "0.0,1",
                "ZE_FLAT_DEVICE_HIERARCHY": "COMPOSITE",
                "ONEAPI_DEVICE_SELECTOR": "level_zero:1",
            },
            ["1"],
        ),
        ({"ZE_AFFINITY_MASK": "0,0.1", "ZE_FLAT_DEVICE_HIERARCHY": "COMPOSITE"}, ["0"]),
        # Level Zero compares the names as they are: anything else is its default, FLAT
        ({"ZE_AFFINITY_MASK": "0.1,1", "ZE_FLAT_DEVICE_HIERARCHY": "composite"}, ["1"]),
    ],
)
def test_reads_the_mask_first_then_the_selector(
    env: dict[str, str], expected: list[str] | None
) -> None:
    assert MANAGER.read_visible(env) == expected


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        # discard terms alone start from every device (SYCL prepends *:*)
        ("!level_zero:1", ["0", "2", "3"]),
        ("!level_zero:1,3;!opencl:gpu", ["0", "2"]),
        ("!*:0", ["1", "2", "3"]),
        ("!opencl:*", None),  # every Level Zero device: unrestricted
        ("!level_zero:gpu", []),
        # a discard takes its devices out of what the accepting terms select
        ("level_zero:*;!level_zero:0", ["1", "2", "3"]),
        ("level_zero:0,1;!level_zero:1", ["0"]),
        ("level_zero:2,0;!level_zero:cpu", ["2", "0"]),
        ("level_zero:cpu", []),  # a device type that names no GPU, not a token ending a list
        ("*:fpga,1", ["1"]),
        ("LEVEL_ZERO:3,1;!Level_Zero:01", ["3"]),
    ],
)
def test_a_selector_discards_devices_from_what_it_accepts(
    selector: str, expected: Optional[list[str]]
) -> None:
    counted = IntelManager()
    counted.root_devices = 4
    assert counted.read_visible({"ONEAPI_DEVICE_SELECTOR": selector}) == expected


def test_discards_count_over_the_mask_where_one_is_set() -> None:
    env = {"ZE_AFFINITY_MASK": "4,5,6", "ONEAPI_DEVICE_SELECTOR": "!level_zero:1"}
    assert MANAGER.read_visible(env) == ["4", "6"]


def test_discards_alone_cannot_be_read_before_the_devices_are_counted() -> None:
    # never widened into "every device": the caller treats it as nothing visible, with why
    with pytest.raises(ValueError, match="known only once the node is detected"):
        MANAGER.read_visible({"ONEAPI_DEVICE_SELECTOR": "!level_zero:1"})


@pytest.mark.parametrize("selector", ["level_zero:*;!level_zero:0,5", "!level_zero:5;!*:0"])
def test_a_node_offers_every_gpu_but_the_discarded_ones(selector: str) -> None:
    node = accelkit.detect_node(load_snapshot(SNAPSHOT, env={"ONEAPI_DEVICE_SELECTOR": selector}))
    assert [d.id for d in node.devices] == ["1", "2", "3", "4", "6", "7"]
    assert not [d for d in node.diagnostics if d.family == "intel" and d.level != "info"]


TEXT = st.one_of(st.none(), st.text(alphabet="level_zro:*;!0123456789,. gpuNoDvFis", max_size=30))


@settings(max_examples=300, deadline=None)
@given(mask=TEXT, selector=TEXT)
def test_any_mask_and_selector_read_without_raising(
    mask: Optional[str], selector: Optional[str]
) -> None:
    env = {
        k: v
        for k, v in (("ZE_AFFINITY_MASK", mask), ("ONEAPI_DEVICE_SELECTOR", selector))
        if v is not None
    }
    counted = IntelManager()
    counted.root_devices = 4  # what detect() keeps: a selector of discards alone needs it
    ids = counted.read_visible(env)
    assert ids is None or all(
        token and token.strip() == token and "," not in token for token in ids
    )


@given(st.lists(st.integers(min_value=0, max_value=15).map(str), max_size=8))
def test_written_ids_read_back_the_same(ids: list[str]) -> None:
    env = {"ZE_AFFINITY_MASK": "9", **MANAGER.visibility_env(ids)}
    assert MANAGER.read_visible({k: v for k, v in env.items() if v is not None}) == ids


@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("Intel(R) Data Center GPU Max 1550", "Intel-GPU-Max-1550"),
        ("Intel(R) Data Center GPU Max 1100", "Intel-GPU-Max-1100"),
        ("Intel(R) Data Center GPU Flex 170", "Intel-GPU-Flex-170"),
        ("Intel(R) Arc(TM) A770 Graphics", "Intel-Arc-A770"),
        ("Intel(R) Arc(TM) Pro A60 Graphics", "Intel-Arc-Pro-A60"),
        ("Intel(R) Arc(TM) B580 Graphics", "Intel-Arc-B580"),
    ],
)
def test_type_labels(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any], name: str, label: str
) -> None:
    card = fake.FakeCard(fake.BUS_IDS[1], device_id=0x1234, name=name)
    devices, _ = run_detect(
        MANAGER, host_with(tmp_path, [card], xpu_smi=(0, fake.xpu_smi_output([card])))
    )
    assert {(d.model, d.type_label) for d in devices} == {(name, label)}  # a Max 1550: 2 stacks


# -- part 2: detection -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("hierarchy", "ids_per_card"),
    # COMBINED: Level Zero shows cards, but SYCL (ONEAPI_DEVICE_SELECTOR's numbering) stacks
    [(None, [2, 2, 1]), ("FLAT", [2, 2, 1]), ("COMPOSITE", [1, 1, 1]), ("combined", [2, 2, 1])],
)
def test_root_devices_follow_the_hierarchy_mode(
    tmp_path: pathlib.Path,
    run_detect: Callable[..., Any],
    hierarchy: Optional[str],
    ids_per_card: list[int],
) -> None:
    cards = fake.fake_cards(5)  # two Max 1550, one Max 1100
    env = {} if hierarchy is None else {"ZE_FLAT_DEVICE_HIERARCHY": hierarchy}
    devices, _ = run_detect(
        MANAGER, host_with(tmp_path, cards, xpu_smi=(0, fake.xpu_smi_output(cards)), env=env)
    )
    assert [d.id for d in devices] == [str(n) for n in range(sum(ids_per_card))]
    per_card = [sum(d.pci_bus_id == c.bus_id for d in devices) for c in cards]
    assert per_card == ids_per_card
    assert [d.parent for d in devices] == [None] * len(devices)  # a stack is a root device


def test_stacks_share_the_card_but_not_its_uuid(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    cards = fake.fake_cards(3)
    devices, _ = run_detect(
        MANAGER, host_with(tmp_path, cards, xpu_smi=(0, fake.xpu_smi_output(cards)))
    )
    assert [(d.pci_bus_id, d.uuid) for d in devices] == [
        (cards[0].bus_id, None),
        (cards[0].bus_id, None),
        (cards[1].bus_id, cards[1].uuid),
    ]
    assert [d.type_label for d in devices] == ["Intel-GPU-Max-1550"] * 2 + ["Intel-GPU-Max-1100"]
    assert {d.source for d in devices} == {"command"}


def test_old_xpu_smi_names_are_resolved_by_pci_id(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    card = fake.FakeCard(fake.BUS_IDS[0], name="Intel(R) Graphics [0x0bd5]")
    devices, _ = run_detect(
        MANAGER, host_with(tmp_path, [card], xpu_smi=(0, fake.xpu_smi_output([card])))
    )
    assert [(d.id, d.type_label, d.model) for d in devices] == [
        ("0", "Intel-GPU-Max-1550", "Max 1550"),
        ("1", "Intel-GPU-Max-1550", "Max 1550"),
    ]


def test_sysfs_layer_skips_other_vendors_and_drivers(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    cards = [
        fake.FakeCard(fake.BUS_IDS[0], 0x0BDA, driver="xe"),
        fake.FakeCard(fake.BUS_IDS[1], 0x0BDA, driver="vfio-pci"),  # passed through to a VM
        fake.FakeCard(fake.BUS_IDS[2], 0x56C0),
    ]
    devices, notes = run_detect(MANAGER, host_with(tmp_path, cards))
    assert [(d.id, d.pci_bus_id, d.type_label, d.source) for d in devices] == [
        ("0", fake.BUS_IDS[0], "Intel-GPU-Max-1100", "sysfs"),
        ("1", fake.BUS_IDS[2], "Intel-GPU-Flex-170", "sysfs"),
    ]
    assert "xpu-smi is not installed" in notes


def test_an_integrated_gpu_keeps_its_ordinal_and_is_not_offered(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    arc = fake.FakeCard("0000:04:00.0", 0x56A0, "Intel(R) Arc(TM) A770 Graphics")
    devices, notes = run_detect(MANAGER, host_with(tmp_path, [fake.INTEGRATED, arc], sysfs=True))
    assert [(d.id, d.pci_bus_id, d.type_label, d.offered) for d in devices] == [
        ("0", fake.INTEGRATED.bus_id, None, False),
        ("1", arc.bus_id, "Intel-Arc-A770", True),
    ]
    assert "integrated GPU: counted, not offered" in notes


def test_an_integrated_gpu_in_xpu_smi_is_not_offered(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    cards = [fake.INTEGRATED, *fake.fake_cards(2)]
    devices, _ = run_detect(
        MANAGER, host_with(tmp_path, cards, xpu_smi=(0, fake.xpu_smi_output(cards)))
    )
    assert [(d.id, d.offered) for d in devices] == [("0", False), ("1", True), ("2", True)]


@pytest.mark.parametrize(
    ("variable", "value", "offered"),
    [
        ("ONEAPI_DEVICE_SELECTOR", "level_zero:0,1", [("1", 1)]),  # read on past the iGPU
        ("ZE_AFFINITY_MASK", "0,1", [("1", 1)]),
        ("ONEAPI_DEVICE_SELECTOR", "level_zero:0", []),  # the iGPU alone: no stand-in GPU
    ],
)
def test_a_visibility_list_naming_the_integrated_gpu_reads_on_past_it(
    tmp_path: pathlib.Path, variable: str, value: str, offered: list[tuple[str, int]]
) -> None:
    arc = fake.FakeCard("0000:04:00.0", 0x56A0, "Intel(R) Arc(TM) A770 Graphics")
    node = accelkit.detect_node(host_with(tmp_path, [fake.INTEGRATED, arc], env={variable: value}))
    assert [(d.id, d.index) for d in node.devices] == offered
    assert node.detected == {"intel": 2}
    assert not [d for d in node.diagnostics if d.family == "intel" and d.level != "info"]


def test_an_integrated_gpu_alone_leaves_another_familys_variable_its_devices(
    tmp_path: pathlib.Path,
) -> None:
    # an Intel iGPU provides no GPU: CUDA_VISIBLE_DEVICES still makes NVIDIA stand-ins where
    # NVIDIA's own tools are absent (a container given GPUs by the variable alone)
    env = {"CUDA_VISIBLE_DEVICES": "0,1"}
    node = accelkit.detect_node(host_with(tmp_path, [fake.INTEGRATED], env=env))
    assert [(d.family, d.id, d.source) for d in node.devices] == [
        ("nvidia", "0", "env"),
        ("nvidia", "1", "env"),
    ]
    assert node.detected == {"intel": 1}


def test_dpctl_gives_root_devices_as_sycl_sees_them(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    roots = [
        ("Intel(R) UHD Graphics 770", 30 * GIB),
        ("Intel(R) Data Center GPU Max 1550", 64 * GIB),
        ("Intel(R) Data Center GPU Max 1550", 64 * GIB),
    ]
    host = host_with(tmp_path, [], dpctl=fake.fake_dpctl(roots))
    devices, notes = run_detect(MANAGER, host)
    assert [(d.id, d.type_label, d.memory_bytes, d.offered) for d in devices] == [
        ("0", None, None, False),  # the integrated GPU: counted, never offered
        ("1", "Intel-GPU-Max-1550", 64 * GIB, True),
        ("2", "Intel-GPU-Max-1550", 64 * GIB, True),
    ]
    assert {d.source for d in devices} == {"library"}
    assert "UHD Graphics 770 (no bus id) is an integrated GPU" in notes


def test_dpctl_probe_returns_plain_data_and_needs_dpctl() -> None:
    with pytest.raises(ImportError):
        dpctl_probe(lambda name: __import__("accelkit_no_such_module"))
    found = dpctl_probe(
        lambda name: fake.fake_dpctl([("Intel(R) Arc(TM) A770 Graphics", 16 * GIB)])
    )
    assert found == [["Intel(R) Arc(TM) A770 Graphics", 16 * GIB]]
    assert json.loads(json.dumps(found)) == found  # crosses the probe process boundary


def test_the_dpctl_probe_runs_in_pci_order_with_the_visibility_variables_lifted(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    """Level Zero reads its variables when dpctl lists devices: the probe's process gets PCI
    order and no selector (the core applies the node's), and this process's stays as it was."""
    host = host_with(tmp_path, [], dpctl=fake.fake_dpctl([("Intel(R) Arc(TM) A770", GIB)]))
    before = dict(os.environ)
    run_detect(MANAGER, host)
    assert host.probe_envs == [
        {
            "ZE_ENABLE_PCI_ID_DEVICE_ORDER": "1",
            "ONEAPI_DEVICE_SELECTOR": None,
            "ZE_AFFINITY_MASK": None,
        }
    ]
    assert dict(os.environ) == before


@pytest.mark.parametrize("variable", ["ZE_AFFINITY_MASK", "ONEAPI_DEVICE_SELECTOR"])
def test_a_visibility_variable_on_the_node_keeps_the_type_dpctl_alone_knows(
    tmp_path: pathlib.Path, variable: str
) -> None:
    """Only dpctl answers (no xpu-smi, no sysfs): the node's variable narrows what is visible
    and must not cost the label."""
    roots = [("Intel(R) Data Center GPU Max 1100", 48 * GIB)] * 2
    host = host_with(tmp_path, [], dpctl=fake.fake_dpctl(roots), env={variable: "1"})
    node = accelkit.detect_node(host)
    assert [(d.id, d.type_label) for d in node.devices] == [("1", "Intel-GPU-Max-1100")]
    assert node.labels["accelkit/accelerator-type"] == "Intel-GPU-Max-1100"


def test_xpu_smi_cards_are_numbered_in_pci_order(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    cards = fake.fake_cards(2)
    listed = json.loads(fake.xpu_smi_output(cards))
    listed["device_list"].reverse()
    host = host_with(tmp_path, cards, xpu_smi=(0, json.dumps(listed)))
    devices, _ = run_detect(MANAGER, host)
    assert [d.pci_bus_id for d in devices] == sorted(d.pci_bus_id for d in devices)
    assert [d.id for d in devices] == [str(n) for n in range(len(devices))]


@pytest.mark.parametrize("bus", [None, "N/A"])
def test_an_xpu_smi_card_without_a_bus_id_gives_the_sysfs_layer(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any], bus: Any
) -> None:
    """Cards are numbered in bus order, a Max 1550 split into its stacks by its bus id: one
    without it was sorted first and kept whole, so every other root device read one or two
    numbers off, silently. The layer fails, and sysfs answers."""
    cards = fake.fake_cards(4)  # two Max 1550s, four root devices
    listed = json.loads(fake.xpu_smi_output(cards))
    if bus is None:
        del listed["device_list"][1]["pci_bdf_address"]
    else:
        listed["device_list"][1]["pci_bdf_address"] = bus
    host = host_with(tmp_path, cards, xpu_smi=(0, json.dumps(listed)))
    devices, notes = run_detect(MANAGER, host)
    assert [(d.id, d.source) for d in devices] == [(str(n), "sysfs") for n in range(4)]
    assert f"with bus id {bus!r}: its place is unknown" in notes


def test_a_failing_dpctl_probe_gives_the_next_layer(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    dpctl = fake.fake_dpctl([])

    def broken(**_: str) -> list[Any]:
        raise RuntimeError("No device of requested type available")

    dpctl.get_devices = broken
    cards = fake.fake_cards(2)
    devices, notes = run_detect(MANAGER, host_with(tmp_path, cards, dpctl=dpctl))
    assert [(d.id, d.source) for d in devices] == [("0", "sysfs"), ("1", "sysfs")]
    assert "probe accelkit_plugins.intel.dpctl_probe failed" in notes


@pytest.mark.parametrize(
    "answer", [(0, "garbage"), (1, ""), TimeoutError("hung"), (0, '{"device_list": 3}')]
)
def test_a_broken_xpu_smi_gives_the_sysfs_layer(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any], answer: Any
) -> None:
    cards = fake.fake_cards(2)
    devices, _ = run_detect(MANAGER, host_with(tmp_path, cards, xpu_smi=answer))
    assert [(d.id, d.source) for d in devices] == [("0", "sysfs"), ("1", "sysfs")]


def test_no_intel_gpu_gives_no_devices(run_detect: Callable[..., Any]) -> None:
    devices, notes = run_detect(MANAGER, accelkit.FakeHost())
    assert devices == []
    assert "no detection layer answered" in notes


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(max_size=300))
def test_any_xpu_smi_output_never_raises(run_detect: Callable[..., Any], output: str) -> None:
    devices, _ = run_detect(MANAGER, accelkit.FakeHost(commands={fake.XPU_SMI_ARGV: (0, output)}))
    assert isinstance(devices, list)


@settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.dictionaries(
            st.sampled_from(["device_name", "pci_device_id", "uuid", "pci_bdf_address"]),
            st.none() | st.integers() | st.text(max_size=12),
        ),
        max_size=3,
    )
)
def test_any_xpu_smi_records_never_raise(
    run_detect: Callable[..., Any], records: list[dict[str, Any]]
) -> None:
    output = json.dumps({"device_list": records})
    devices, _ = run_detect(MANAGER, accelkit.FakeHost(commands={fake.XPU_SMI_ARGV: (0, output)}))
    assert len(devices) <= 2 * len(records)


# -- part 3: fake hosts and the snapshot -------------------------------------------------------
@pytest.mark.parametrize("count", [0, 1, 2, 3, 4, 8])
def test_make_host_has_count_root_devices(check_make_host: Callable[..., Any], count: int) -> None:
    check_make_host(MANAGER, fake.make_host, count)


def test_snapshot_of_a_four_card_max_1550_server(check_snapshot: Callable[..., Any]) -> None:
    devices = check_snapshot(MANAGER, SNAPSHOT, 8, "Intel-GPU-Max-1550")  # 4 cards x 2 stacks
    assert len({d.pci_bus_id for d in devices}) == 4


def test_snapshot_in_composite_mode_has_one_device_per_card() -> None:
    replay = load_snapshot(SNAPSHOT)
    data = json.loads((SNAPSHOT / "snapshot.json").read_text())
    composite = accelkit.FakeHost(
        root=SNAPSHOT / "root",
        env={"ZE_FLAT_DEVICE_HIERARCHY": "COMPOSITE"},
        commands={tuple(c["argv"]): (c["returncode"], c["stdout"]) for c in data["commands"]},
    )
    assert len(MANAGER.detect(replay)) == 8
    assert [d.id for d in MANAGER.detect(composite)] == ["0", "1", "2", "3"]
    by_sysfs = MANAGER.detect(accelkit.FakeHost(root=os.fspath(SNAPSHOT / "root")))
    assert [(d.id, d.pci_bus_id) for d in by_sysfs] == [
        (d.id, d.pci_bus_id) for d in MANAGER.detect(replay)
    ]


def test_a_composite_mask_naming_a_stack_says_so_and_offers_whole_cards_only() -> None:
    env = {"ZE_FLAT_DEVICE_HIERARCHY": "COMPOSITE", "ZE_AFFINITY_MASK": "2,1.0"}
    node = accelkit.detect_node(load_snapshot(SNAPSHOT, env=env))
    assert [d.id for d in node.devices] == ["2"]
    assert [d.message for d in node.diagnostics if d.level == "warning"] == [
        "ZE_AFFINITY_MASK names stacks (1.0): each shows its card with one stack, which is not "
        "offered (name whole cards, or use FLAT mode)"
    ]


def test_a_mask_token_naming_nothing_is_said_of_the_mask() -> None:
    node = accelkit.detect_node(load_snapshot(SNAPSHOT, env={"ZE_AFFINITY_MASK": "1,9"}))
    assert [d.id for d in node.devices] == ["1"]
    warnings = [d.message for d in node.diagnostics if d.level == "warning"]
    assert len(warnings) == 1 and warnings[0].startswith("ZE_AFFINITY_MASK names '9', which")
