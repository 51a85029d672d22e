"""detect_node: families, visibility, exclusions, overrides, partitions, resources, labels."""

from __future__ import annotations

from pathlib import Path

import pytest
from accelkit import hookimpl, registry
from accelkit.device import Device
from accelkit.diagnostics import note
from accelkit.errors import ConfigurationError
from accelkit.host import FakeHost, Host, HostView
from accelkit.manager import AcceleratorManager
from accelkit.node._detect import detect_node
from accelkit.node._operator import EXCLUDE_ENV, OVERRIDE_ENV
from accelkit.node._record import Node
from accelkit.node._state import NODE_FAMILY
from core_fakes import (
    ACME_CSV,
    AcmeManager,
    MakeManagers,
    Provides,
    RivalManager,
    WidgetManager,
    acme_csv,
    acme_host,
    acme_sysfs,
    static_manager,
)


def levels(node: Node, level: str) -> list[str]:
    return [f"{d.family}: {d.message}" for d in node.diagnostics if d.level == level]


def ids(node: Node, family: str = "acme") -> list[str]:
    return [d.id for d in node.devices if d.family == family]


# -- detection --------------------------------------------------------------------------------
def test_detected_devices_get_family_resource_and_index(generic: object) -> None:
    node = detect_node(acme_host())
    assert [(d.id, d.index, d.family, d.resource_name, d.source) for d in node.devices] == [
        ("0", 0, "acme", "GPU", "command"),
        ("1", 1, "acme", "GPU", "command"),
    ]
    assert node.devices[1].uuid == "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
    assert node.resources == {"GPU": 2.0, "accelerator_type:Z9": 1.0}
    assert node.labels == {
        "accelkit/accelerator-type": "Z9",
        "accelkit/acme.count": "2",
        "accelkit/acme.type": "Z9",
        "accelkit/acme.driver": "acme-test",
    }
    assert levels(node, "info") == [
        "acme: 2 device(s) from the command layer",
        "acme: labels driver come from the plugin's labels()",  # ls -v explains computed facts
    ]


def test_the_same_host_gives_an_equal_node(generic: object, sandbox: Path) -> None:
    acme_sysfs(sandbox, 3)
    (sandbox / "dev").mkdir()
    (sandbox / "dev/widget0").write_text("")
    host = FakeHost(root=sandbox, env={"WIDGET_POD": "p1"})
    first, second = detect_node(host), detect_node(host)
    assert first == second
    assert first.to_dict() == second.to_dict()
    assert first.to_dict()["resources"] == {
        "GPU": 3.0,
        "WPU": 1.0,
        "accelerator_type:Y7": 1.0,
        "accelerator_type:W-1": 1.0,
        "widget-pod-p1": 1.0,
    }


def test_index_comes_from_detection_order_when_the_layer_gives_none(
    use_managers: MakeManagers,
) -> None:
    use_managers(static_manager("chip", "CHIP", [Device("b"), Device("a", index=7), Device("c")]))
    node = detect_node(FakeHost())
    assert [(d.id, d.index) for d in node.devices] == [("b", 0), ("a", 7), ("c", 2)]


def test_a_family_that_raises_or_times_out_is_a_diagnostic_and_others_answer(
    use_managers: MakeManagers,
) -> None:
    use_managers(
        static_manager("broken", "GPU", RuntimeError("driver exploded")),
        static_manager("slow", "TPU", TimeoutError("tpu-info hung for 10s")),
        AcmeManager(),
    )
    node = detect_node(acme_host())
    assert ids(node) == ["0", "1"]
    assert levels(node, "error") == [
        "broken: detection failed: RuntimeError: driver exploded",
        "slow: detection timed out: tpu-info hung for 10s",
    ]


def test_detect_returning_garbage_or_duplicates_is_diagnosed(use_managers: MakeManagers) -> None:
    use_managers(
        static_manager("odd", "GPU", ["0", "1"]),  # type: ignore[list-item]
        static_manager("twice", "NPU", [Device("0"), Device("0", model="again"), Device("00")]),
    )
    node = detect_node(FakeHost())
    assert [(d.family, d.id, d.model) for d in node.devices] == [("twice", "0", None)]
    assert any("not a list of Device" in m for m in levels(node, "error"))
    assert levels(node, "warning") == [
        "twice: device id '0' was detected twice; keeping the first",
        "twice: device id '00' was detected twice; keeping the first",  # "00" is index 0 too
    ]


def test_naming_methods_that_raise_are_diagnostics(use_managers: MakeManagers) -> None:
    def bad_labels(self: object, devices: object, host: object) -> dict[str, str]:
        raise KeyError("oops")

    use_managers(static_manager("chip", "CHIP", [Device("0", type_label="C1")], labels=bad_labels))
    node = detect_node(FakeHost())
    assert node.resources["CHIP"] == 1.0
    assert node.labels["accelkit/chip.count"] == "1"
    assert levels(node, "error") == ["chip: labels() failed: KeyError: 'oops'"]


# -- partitions -------------------------------------------------------------------------------
def test_a_parent_listed_with_its_partitions_is_left_out(use_managers: MakeManagers) -> None:
    devices = [
        Device("0", type_label="A100"),
        Device("MIG-a", parent="0", type_label="A100-1g.5gb"),
        Device("MIG-b", parent="0", type_label="A100-1g.5gb"),
        Device("1", type_label="A100"),
    ]
    use_managers(static_manager("chip", "GPU", devices))
    node = detect_node(FakeHost())
    assert ids(node, "chip") == ["MIG-a", "MIG-b", "1"]
    assert node.resources == {
        "GPU": 3.0,
        "accelerator_type:A100-1g.5gb": 1.0,
        "accelerator_type:A100": 1.0,
    }
    assert levels(node, "warning") == [
        "chip: device 0 was listed with its 2 partition(s); only the partitions are "
        "allocatable, so the device itself is left out"
    ]


def test_an_override_takes_no_id_of_a_device_left_out_for_its_partitions(
    use_managers: MakeManagers,
) -> None:
    # "0" holds "1", which holds "2": both are left out, and neither id may go to a logical
    # device (a grant of it would show the worker the whole device)
    devices = [Device("0"), Device("1", parent="0"), Device("2", parent="1")]
    use_managers(static_manager("chip", "CHIP", devices))
    node = detect_node(FakeHost(), {"CHIP": 3})
    assert [(d.id, d.source) for d in node.devices] == [
        ("2", ""),
        ("3", "override"),
        ("4", "override"),
    ]


# -- visibility -------------------------------------------------------------------------------
def test_the_visibility_variable_restricts_and_supplies_ids_in_its_order(
    generic: object,
) -> None:
    host = acme_host(env={"ACME_VISIBLE_DEVICES": "5, 2,3"}, csv=acme_csv(8))
    node = detect_node(host)
    assert [(d.id, d.index, d.uuid) for d in node.devices] == [
        ("5", 0, "GPU-00000005-0000-4000-8000-000000000005"),
        ("2", 1, "GPU-00000002-0000-4000-8000-000000000002"),
        ("3", 2, "GPU-00000003-0000-4000-8000-000000000003"),
    ]
    assert all(d.model == "Acme Z9" and d.memory_bytes == 16 << 30 for d in node.devices)
    assert node.resources["GPU"] == 3.0
    assert node.labels["accelkit/acme.count"] == "3"


def test_visibility_tokens_may_be_uuids_and_repeats_are_dropped(generic: object) -> None:
    uuid = "GPU-00000006-0000-4000-8000-000000000006"
    uuid1 = "GPU-00000001-0000-4000-8000-000000000001"
    host = acme_host(env={"ACME_VISIBLE_DEVICES": f"{uuid},1,1,{uuid1}"}, csv=acme_csv(8))
    node = detect_node(host)
    assert [(d.id, d.uuid) for d in node.devices] == [
        (uuid, uuid),
        ("1", "GPU-00000001-0000-4000-8000-000000000001"),
    ]
    assert levels(node, "warning") == [
        "acme: ACME_VISIBLE_DEVICES names device 1 more than once ('1'); keeping the first",
        f"acme: ACME_VISIBLE_DEVICES names device 1 more than once ({uuid1!r}); keeping the first",
    ]


def test_the_first_token_that_names_no_detected_device_ends_the_list(generic: object) -> None:
    """``2,3,5`` where 3 GPUs are detected (0-2): "3" names none, so the runtime stops there (CUDA,
    HIP and ROCr do) and only "2" is visible; "3" and "5" never become devices of their own."""
    node = detect_node(acme_host(env={"ACME_VISIBLE_DEVICES": "2,3,5"}, csv=acme_csv(3)))
    assert [(d.id, d.index, d.uuid) for d in node.devices] == [
        ("2", 0, "GPU-00000002-0000-4000-8000-000000000002")
    ]
    assert node.resources == {"GPU": 1.0, "accelerator_type:Z9": 1.0}
    assert levels(node, "warning") == [
        "acme: ACME_VISIBLE_DEVICES names '3', which matches no detected device by id, UUID or "
        "index; the runtime stops reading the list there, leaving out '3', '5' (name only devices "
        "this node has)"
    ]
    with pytest.raises(ConfigurationError) as caught:
        detect_node(acme_host(env={"ACME_VISIBLE_DEVICES": "2,3,5"}, csv=acme_csv(3)), {"GPU": 3})
    assert "ACME_VISIBLE_DEVICES='2,3,5' allows 1" in str(caught.value)
    assert "GPU=3 from overrides" in str(caught.value)


def test_design_example_2_3_5_names_logical_gpus_where_none_is_detected(generic: object) -> None:
    """DESIGN: ``CUDA_VISIBLE_DEVICES=2,3,5`` with an override of 3 GPUs gives "2","3","5"."""
    host = acme_host(env={"ACME_VISIBLE_DEVICES": "2,3,5"}, csv=None)
    node = detect_node(host, {"GPU": 3})
    assert [(d.id, d.index, d.source) for d in node.devices] == [
        ("2", 0, "env"),
        ("3", 1, "env"),
        ("5", 2, "env"),
    ]
    with pytest.raises(ConfigurationError) as caught:
        detect_node(host, {"GPU": 4})
    assert "ACME_VISIBLE_DEVICES='2,3,5' allows 3" in str(caught.value)


@pytest.mark.parametrize("csv", [acme_csv(8), None], ids=["detected", "logical"])
def test_the_operators_override_is_the_nodes_and_a_variable_shows_part_of_it(
    generic: object, csv: object
) -> None:
    """An operator's ``ACCELKIT_OVERRIDE_RESOURCES`` ({"GPU": 4} on an 8-GPU node, or 8 made-up
    GPUs) is inherited by every process of the node, a worker granted two GPUs too: detection
    there raised, so ``accelkit ls``, ``env`` and ``resources`` failed in every such job. The
    count is the node's; the variable shows this process part of it. A caller's own override
    asking more than the variable allows is still refused."""
    operator = {"ACCELKIT_OVERRIDE_RESOURCES": '{"GPU": 4}', "ACME_VISIBLE_DEVICES": "0,1"}
    host = acme_host(env=operator, csv=csv)
    node = detect_node(host)
    assert [d.id for d in node.devices] == ["0", "1"]
    assert "override GPU=4 from ACCELKIT_OVERRIDE_RESOURCES is the node's" in " ".join(
        d.message for d in node.diagnostics
    )
    with pytest.raises(ConfigurationError, match="ACME_VISIBLE_DEVICES='0,1' allows 2"):
        detect_node(host, {"GPU": 4})


def test_an_index_never_names_a_partition(use_managers: MakeManagers) -> None:
    """A MIG-enabled GPU is never handed out by its parent index, even through the variable: a
    stray index names no device, and ends the list there."""
    instances = [Device(f"MIG-{n}", parent="GPU-a", type_label="A100-1g.5gb") for n in range(2)]

    def matches(self: object, token: str, device: Device) -> bool:  # as NVIDIA's: ids only
        return token == device.id

    use_managers(
        static_manager(
            "chip", "CHIP", instances, visible_devices_env_var="CHIP_VISIBLE", matches=matches
        )
    )
    node = detect_node(FakeHost(env={"CHIP_VISIBLE": "MIG-1,0,MIG-0"}))
    assert [(d.id, d.parent) for d in node.devices] == [("MIG-1", "GPU-a")]
    assert detect_node(FakeHost(env={"CHIP_VISIBLE": "0,MIG-1"})).devices == []


def test_a_token_two_devices_match_names_neither(use_managers: MakeManagers) -> None:
    """A UUID prefix two devices share names no device (ROCr's rule; CUDA asks for a unique
    prefix), so it ends the list like any token that names none."""
    devices = [Device(str(n), uuid=f"GPU-ab{n}") for n in range(2)]

    def matches(self: object, token: str, device: Device) -> bool:
        return (device.uuid or "").startswith(token)

    use_managers(
        static_manager("chip", "CHIP", devices, visible_devices_env_var="V", matches=matches)
    )
    node = detect_node(FakeHost(env={"V": "GPU-ab1,GPU-ab,0"}))
    assert [(d.id, d.uuid) for d in node.devices] == [("GPU-ab1", "GPU-ab1")]
    assert levels(node, "warning") == [
        "chip: V names 'GPU-ab', which matches 2 detected devices ('0', '1'); the runtime stops "
        "reading the list there, leaving out 'GPU-ab', '0' (name only devices this node has)"
    ]


def test_a_token_naming_an_excluded_device_does_not_end_the_list(generic: object) -> None:
    env = {"ACME_VISIBLE_DEVICES": "1,0", EXCLUDE_ENV: "acme:1"}
    node = detect_node(acme_host(env=env, csv=acme_csv(2)))
    assert [(d.id, d.index) for d in node.devices] == [("0", 1)]  # the runtime counts 1 first
    assert levels(node, "warning") == []


def withholding(use_managers: MakeManagers, **attributes: object) -> None:
    """A family of three chips whose chip 1 its plugin does not offer."""
    devices = [Device("0", uuid="C-0"), Device("1", uuid="C-1", offered=False), Device("2")]
    use_managers(
        static_manager(
            "chip", "CHIP", devices, visible_devices_env_var="CHIP_VISIBLE", **attributes
        )
    )


def test_a_device_not_offered_is_never_in_the_node_but_counts_as_detected(
    use_managers: MakeManagers,
) -> None:
    withholding(use_managers)
    node = detect_node(FakeHost())
    assert [(d.id, d.index) for d in node.devices] == [("0", 0), ("2", 2)]
    assert node.resources == {"CHIP": 2.0}
    assert node.detected == {"chip": 3}  # a grant of both offered chips is not the whole host
    assert Node.from_dict(node.to_dict()) == node


@pytest.mark.parametrize(
    ("value", "visible"),
    [
        ("0,1,2", [("0", 0), ("2", 2)]),  # the runtime counts chip 1: read on past it
        ("C-1,2", [("2", 1)]),  # named by the family's own matching (a UUID) too
        ("2,1,0", [("2", 0), ("0", 2)]),
        ("1,7,0", []),  # 7 names nothing: the list still ends there
    ],
)
def test_a_token_naming_a_device_not_offered_does_not_end_the_list(
    use_managers: MakeManagers, value: str, visible: list[tuple[str, int]]
) -> None:
    def matches(self: object, token: str, device: Device) -> bool:
        return token == device.uuid or AcceleratorManager.matches(self, token, device)  # type: ignore[arg-type]

    withholding(use_managers, matches=matches)
    node = detect_node(FakeHost(env={"CHIP_VISIBLE": value}))
    assert [(d.id, d.index) for d in node.devices] == visible
    ends = [w for w in levels(node, "warning") if "stops reading the list there" in w]
    assert len(ends) == (1 if "7" in value else 0)


def test_a_variable_naming_only_devices_not_offered_makes_no_stand_ins(
    use_managers: MakeManagers,
) -> None:
    devices = [Device("0", offered=False)]
    use_managers(static_manager("chip", "CHIP", devices, visible_devices_env_var="CHIP_VISIBLE"))
    node = detect_node(FakeHost(env={"CHIP_VISIBLE": "0"}))
    assert node.devices == [] and node.resources == {}
    assert node.detected == {"chip": 1}
    assert levels(node, "warning") == []


def test_a_prefix_a_device_not_offered_shares_is_ambiguous(use_managers: MakeManagers) -> None:
    # the runtime counts chip 1 too, so "C-" names two devices: the list ends, as with two
    # offered ones (CUDA refuses a UUID prefix two GPUs share)
    def matches(self: object, token: str, device: Device) -> bool:
        return bool(device.uuid and device.uuid.startswith(token))

    withholding(use_managers, matches=matches)
    node = detect_node(FakeHost(env={"CHIP_VISIBLE": "C-,2"}))
    assert node.devices == []
    assert levels(node, "warning") == [
        "chip: CHIP_VISIBLE names 'C-', which matches 2 detected devices ('0', '1'); the runtime "
        "stops reading the list there, leaving out 'C-', '2' (name only devices this node has)"
    ]


def test_devices_keep_their_ordinals_when_a_token_reaches_a_partition(
    use_managers: MakeManagers,
) -> None:
    # "1" reaches partition "a" by its index, whose parent is "1": it is left out, and "c" keeps
    # the ordinal the runtime gives it, after "w" (not offered) and "1"
    devices = [
        Device("w", 0, offered=False),
        Device("a", 1, parent="1"),
        Device("b", 2, parent="1"),
        Device("c", 3),
    ]
    use_managers(static_manager("chip", "CHIP", devices, visible_devices_env_var="CHIP_VISIBLE"))
    node = detect_node(FakeHost(env={"CHIP_VISIBLE": "w,1,c"}))
    assert [(d.id, d.index) for d in node.devices] == [("c", 2)]


def test_excluding_a_device_not_offered_excludes_nothing_and_is_no_mistake(
    use_managers: MakeManagers,
) -> None:
    withholding(use_managers)
    node = detect_node(FakeHost(env={EXCLUDE_ENV: "chip:1"}))
    assert [d.id for d in node.devices] == ["0", "2"]
    assert levels(node, "warning") == []
    assert f"chip: {EXCLUDE_ENV} names chip:1, a device not offered anyway" in levels(node, "info")


@pytest.mark.parametrize("second", [True, False], ids=["offered", "not offered"])
def test_excluding_a_prefix_two_devices_share_excludes_each_and_says_so(
    use_managers: MakeManagers, second: bool
) -> None:
    # a visibility list ends at such a prefix; an exclusion errs on the side of not using a
    # device: it excludes every offered device the prefix matches, and warns
    def matches(self: object, token: str, device: Device) -> bool:
        return bool(device.uuid and device.uuid.startswith(token))

    devices = [Device("0", uuid="C-0"), Device("1", uuid="C-1", offered=second), Device("2")]
    use_managers(static_manager("chip", "CHIP", devices, matches=matches))
    node = detect_node(FakeHost(env={EXCLUDE_ENV: "chip:C-"}))
    assert [d.id for d in node.devices] == ["2"]
    excluded = [m for m in levels(node, "info") if m.endswith(f"is excluded by {EXCLUDE_ENV}")]
    ids = ["0", "1"] if second else ["0"]  # a device not offered is never excluded: not in use
    assert excluded == [f"chip: device {i} is excluded by {EXCLUDE_ENV}" for i in ids]
    assert levels(node, "warning") == [
        f"chip: {EXCLUDE_ENV} names chip:C-, which matches 2 devices ('0', '1'); excluding "
        "each (name one device by its id or whole UUID)"
    ]


def test_an_override_never_names_a_device_the_host_has(use_managers: MakeManagers) -> None:
    # logical devices take free ids: not the unoffered chip's, nor an excluded one's
    withholding(use_managers)
    node = detect_node(FakeHost(env={EXCLUDE_ENV: "chip:2"}), {"CHIP": 3})
    assert [(d.id, d.index, d.source) for d in node.devices] == [
        ("0", 0, ""),
        ("3", 3, "override"),
        ("4", 4, "override"),
    ]


def test_a_value_that_reads_as_nothing_by_accident_is_a_warning(
    use_managers: MakeManagers,
) -> None:
    def read_visible(self: object, env: dict[str, str]) -> list[str] | None:
        return [] if "CHIP_VISIBLE" in env else None  # e.g. CUDA stopping at a bad first token

    use_managers(
        static_manager(
            "chip",
            "CHIP",
            [Device("0"), Device("1")],
            visible_devices_env_var="CHIP_VISIBLE",
            read_visible=read_visible,
        )
    )
    node = detect_node(FakeHost(env={"CHIP_VISIBLE": "x0"}))
    assert node.devices == []
    assert levels(node, "warning") == [
        "chip: CHIP_VISIBLE='x0' makes none of the 2 detected device(s) visible"
    ]
    assert levels(detect_node(FakeHost(env={"CHIP_VISIBLE": " NoDevFiles"})), "warning") == []


@pytest.mark.parametrize("value", ["", "NoDevFiles", " "])
def test_nothing_visible_gives_no_devices(generic: object, value: str) -> None:
    node = detect_node(acme_host(env={"ACME_VISIBLE_DEVICES": value}))
    assert node.devices == []
    assert "GPU" not in node.resources
    assert levels(node, "warning") == []


def test_without_detection_the_tokens_become_logical_devices(generic: object) -> None:
    node = detect_node(acme_host(env={"ACME_VISIBLE_DEVICES": "3,GPU-x"}, csv=None))
    assert [(d.id, d.index, d.source, d.family) for d in node.devices] == [
        ("3", 0, "env", "acme"),
        ("GPU-x", 1, "env", "acme"),
    ]
    assert node.resources == {"GPU": 2.0}


def test_no_logical_devices_when_another_family_provides_the_resource(
    generic: object, sandbox: Path
) -> None:
    (sandbox / "etc/rival").mkdir(parents=True)
    (sandbox / "etc/rival/count").write_text("2\n")
    host = FakeHost(root=sandbox, env={"ACME_VISIBLE_DEVICES": "0,1"})
    node = detect_node(host)
    assert [(d.family, d.id) for d in node.devices] == [("rival", "0"), ("rival", "1")]
    assert node.resources["GPU"] == 2.0


def test_broken_visibility_rules_are_an_error_and_leave_the_family_empty(
    use_managers: MakeManagers,
) -> None:
    def matches(self: object, token: str, device: Device) -> bool:
        raise TypeError("bug")

    use_managers(
        static_manager("chip", "CHIP", [Device("a")], visible_devices_env_var="V", matches=matches),
        static_manager("other", "NPU", [Device("0")]),
    )
    node = detect_node(FakeHost(env={"V": "0"}))
    assert [d.family for d in node.devices] == ["other"]
    assert levels(node, "error") == ["chip: visibility rules failed: TypeError: bug; no devices"]


def test_only_the_first_family_of_a_resource_makes_logical_devices(
    use_managers: MakeManagers,
) -> None:
    use_managers(
        static_manager("first", "GPU", [], visible_devices_env_var="SHARED_VISIBLE"),
        static_manager("second", "GPU", [], visible_devices_env_var="SHARED_VISIBLE"),
    )
    node = detect_node(FakeHost(env={"SHARED_VISIBLE": "0,1"}))
    assert [(d.family, d.id, d.source) for d in node.devices] == [
        ("first", "0", "env"),
        ("first", "1", "env"),
    ]
    assert node.resources == {"GPU": 2.0}


def test_an_unreadable_visibility_variable_means_nothing_visible(
    use_managers: MakeManagers,
) -> None:
    def read_visible(self: object, env: dict[str, str]) -> list[str]:
        raise ValueError(f"cannot parse {env['CHIP_VISIBLE']!r}")

    use_managers(
        static_manager(
            "chip",
            "CHIP",
            [Device("0"), Device("1")],
            visible_devices_env_var="CHIP_VISIBLE",
            read_visible=read_visible,
        ),
        static_manager("spaced", "NPU", [Device("0")], read_visible=lambda self, env: ["a b"]),
    )
    node = detect_node(FakeHost(env={"CHIP_VISIBLE": "0-x"}))
    assert node.devices == []
    assert levels(node, "error")[0] == (
        "chip: cannot read CHIP_VISIBLE='0-x': cannot parse '0-x'; treating it as nothing "
        "visible (fix or unset the variable)"
    )
    assert levels(node, "error")[1].startswith("spaced: cannot read the spaced visibility")
    with pytest.raises(ConfigurationError, match="CHIP_VISIBLE='0-x'"):
        detect_node(FakeHost(env={"CHIP_VISIBLE": "0-x"}), {"CHIP": 1})


# -- exclusions -------------------------------------------------------------------------------
def test_excluded_devices_vanish_with_an_info_diagnostic(generic: object) -> None:
    uuid = "GPU-00000002-0000-4000-8000-000000000002"
    env = {EXCLUDE_ENV: f"acme:{uuid}, acme:4 ,nobody:1,broken"}
    node = detect_node(acme_host(env=env, csv=acme_csv(5)))
    assert ids(node) == ["0", "1", "3"]
    info = levels(node, "info")
    assert f"acme: device 2 is excluded by {EXCLUDE_ENV}" in info
    assert f"acme: device 4 is excluded by {EXCLUDE_ENV}" in info
    assert levels(node, "warning") == [
        f"{NODE_FAMILY}: {EXCLUDE_ENV} entry 'nobody:1' names an unknown family; known: "
        "['acme', 'rival', 'widget']",
        f"{NODE_FAMILY}: {EXCLUDE_ENV} entry 'broken' is not family:device "
        "(e.g. nvidia:GPU-… or nvidia:3); ignoring it",
    ]


def test_excluding_a_device_that_is_also_visible_is_not_a_warning(generic: object) -> None:
    env = {EXCLUDE_ENV: "acme:3", "ACME_VISIBLE_DEVICES": "3,5"}
    node = detect_node(acme_host(env=env, csv=acme_csv(8)))
    assert ids(node) == ["5"]
    assert levels(node, "warning") == []


def test_excluding_a_token_that_matches_nothing_is_a_warning(generic: object) -> None:
    node = detect_node(acme_host(env={EXCLUDE_ENV: "acme:GPU-nope"}))
    assert ids(node) == ["0", "1"]
    assert levels(node, "warning") == [
        f"acme: {EXCLUDE_ENV} names acme:GPU-nope, which matches no device"
    ]


def test_excluding_a_parent_excludes_its_partitions(use_managers: MakeManagers) -> None:
    devices = [Device("MIG-a", parent="0"), Device("MIG-b", parent="0"), Device("1")]
    use_managers(static_manager("chip", "GPU", devices))
    node = detect_node(FakeHost(env={EXCLUDE_ENV: "chip:0"}))
    assert ids(node, "chip") == ["1"]


# -- overrides --------------------------------------------------------------------------------
def test_a_smaller_override_keeps_the_first_devices(generic: object) -> None:
    node = detect_node(acme_host(csv=acme_csv(4)), {"GPU": 2})
    assert ids(node) == ["0", "1"]
    assert node.resources["GPU"] == 2.0
    assert node.labels["accelkit/acme.count"] == "2"


def test_a_larger_override_adds_logical_devices_with_free_ids(generic: object) -> None:
    node = detect_node(acme_host(), {"GPU": 4})
    assert [(d.id, d.index, d.source) for d in node.devices] == [
        ("0", 0, "command"),
        ("1", 1, "command"),
        ("2", 2, "override"),
        ("3", 3, "override"),
    ]
    assert node.resources == {"GPU": 4.0, "accelerator_type:Z9": 1.0}


def test_an_override_without_devices_uses_the_default_family(generic: object) -> None:
    node = detect_node(FakeHost(), {"GPU": 2})  # like ray.init(num_gpus=2)
    assert [(d.family, d.id, d.source) for d in node.devices] == [
        ("acme", "0", "override"),
        ("acme", "1", "override"),
    ]
    assert node.resources == {"GPU": 2.0}
    assert node.labels == {"accelkit/acme.count": "2", "accelkit/acme.driver": "acme-test"}


def test_an_override_extends_the_family_that_has_devices(generic: object, sandbox: Path) -> None:
    (sandbox / "etc/rival").mkdir(parents=True)
    (sandbox / "etc/rival/count").write_text("1\n")
    node = detect_node(FakeHost(root=sandbox), {"GPU": 3})
    assert [(d.family, d.id, d.source) for d in node.devices] == [
        ("rival", "0", ""),
        ("rival", "1", "override"),
        ("rival", "2", "override"),
    ]


def test_a_smaller_override_counts_families_in_registry_order(
    generic: object, sandbox: Path
) -> None:
    (sandbox / "etc/rival").mkdir(parents=True)
    (sandbox / "etc/rival/count").write_text("2\n")
    host = FakeHost(root=sandbox, commands={"acme-smi": (0, ACME_CSV)})
    assert detect_node(host).resources["GPU"] == 4.0
    node = detect_node(host, {"GPU": 3})
    assert [(d.family, d.id) for d in node.devices] == [
        ("acme", "0"),
        ("acme", "1"),
        ("rival", "0"),
    ]
    assert node.resources["GPU"] == 3.0


def test_an_override_beyond_the_visibility_variable_names_both(generic: object) -> None:
    host = acme_host(env={"ACME_VISIBLE_DEVICES": "1"})
    with pytest.raises(ConfigurationError) as caught:
        detect_node(host, {"GPU": 2})
    assert "ACME_VISIBLE_DEVICES='1'" in str(caught.value)
    assert "GPU=2 from overrides" in str(caught.value)
    with pytest.raises(ConfigurationError, match="ACME_VISIBLE_DEVICES=''"):
        detect_node(acme_host(env={"ACME_VISIBLE_DEVICES": ""}), {"GPU": 1})
    assert ids(detect_node(host, {"GPU": 1})) == ["1"]


def test_override_zero_removes_the_resource(generic: object) -> None:
    node = detect_node(acme_host(), {"GPU": 0})
    assert node.devices == []
    assert node.resources == {}
    assert node.labels == {}


def test_a_resource_no_manager_owns_is_plain_capacity(generic: object) -> None:
    node = detect_node(acme_host(), {"custom": 0.5, "accelerator_type:Z9": 0})
    assert node.resources == {"GPU": 2.0, "custom": 0.5}
    assert len(node.devices) == 2


def test_overrides_from_the_environment_and_the_argument_wins(generic: object) -> None:
    env = {OVERRIDE_ENV: '{"GPU": 1, "custom": 3}'}
    node = detect_node(acme_host(env=env))
    assert (node.resources["GPU"], node.resources["custom"]) == (1.0, 3.0)
    node = detect_node(acme_host(env=env), {"GPU": 2})
    assert (node.resources["GPU"], node.resources["custom"]) == (2.0, 3.0)


@pytest.mark.parametrize(
    ("env", "overrides", "message"),
    [
        ({OVERRIDE_ENV: "{GPU: 2}"}, None, "is not JSON"),
        ({OVERRIDE_ENV: "[2]"}, None, "must be a JSON object"),
        ({OVERRIDE_ENV: '{"GPU": -1}'}, None, "must not be negative"),
        ({}, {"GPU": 1.5}, "whole number"),
        ({}, {"GPU": "two"}, "must be a number"),
        ({}, {"custom": 1.5}, "above 1 and not whole"),
        ({}, {"": 1}, "non-empty strings"),
    ],
)
def test_malformed_overrides_are_configuration_errors(
    generic: object, env: dict[str, str], overrides: dict[str, object] | None, message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        detect_node(acme_host(env=env), overrides)


@pytest.mark.parametrize("value", [-1, float("nan"), True, "two"])
def test_an_override_that_is_no_count_says_what_an_override_takes(
    generic: object, value: object
) -> None:
    """It gave a request's advice, "ask for 0 (nothing), a fraction from 0.0001 to 1, or a whole
    number", and then refused GPU=0.5 as "counted in whole devices"."""
    with pytest.raises(ConfigurationError) as raised:
        detect_node(acme_host(), {"GPU": value})
    assert str(raised.value).endswith(
        ": give 0 (removes the resource) or a whole number of devices (a fraction only for "
        "capacity no device counts)"
    )


# -- resources and labels ---------------------------------------------------------------------
def test_families_with_one_resource_add_up_and_each_type_counts_once(
    generic: object, sandbox: Path
) -> None:
    (sandbox / "etc/rival").mkdir(parents=True)
    (sandbox / "etc/rival/count").write_text("3\n")
    node = detect_node(FakeHost(root=sandbox, commands={"acme-smi": (0, acme_csv(2))}))
    assert node.resources == {"GPU": 5.0, "accelerator_type:Z9": 1.0, "accelerator_type:R1": 1.0}
    # two types on one node: no node-wide type label (DESIGN: only when every device shares one)
    assert "accelkit/accelerator-type" not in node.labels
    assert node.labels["accelkit/acme.type"] == "Z9"
    assert node.labels["accelkit/rival.count"] == "3"
    assert node.labels["accelkit/rival.type"] == "R1"
    assert list(dict.fromkeys(d.family for d in node.devices)) == ["acme", "rival"]


def test_one_family_with_two_types_offers_both(generic: object) -> None:
    """A node with T4s and A100s has accelerator_type:T4 and accelerator_type:A100."""
    csv = acme_csv(2, "Acme T4") + "2, GPU-2, Acme A100, 40960\n3, GPU-3, Acme T4, 16384\n"
    node = detect_node(acme_host(csv=csv))
    assert node.resources == {"GPU": 4.0, "accelerator_type:T4": 1.0, "accelerator_type:A100": 1.0}
    assert [d.type_label for d in node.devices] == ["T4", "T4", "A100", "T4"]
    # No type label names the family, or a pod selecting acme.type=T4 could be given the A100.
    assert "accelkit/acme.type" not in node.labels
    assert "accelkit/accelerator-type" not in node.labels
    assert node.labels["accelkit/acme.count"] == "4"
    [why] = [d.message for d in node.diagnostics if "acme.type" in d.message]
    assert why == (
        "no accelkit/acme.type label: its devices have several types (A100, T4); the "
        "accelerator_type:<label> resources name them"
    )


def test_label_prefix_is_configurable(generic: object) -> None:
    node = detect_node(acme_host(), label_prefix="example.com/")
    assert sorted(node.labels) == [
        "example.com/accelerator-type",
        "example.com/acme.count",
        "example.com/acme.driver",
        "example.com/acme.type",
    ]


def test_plugin_node_labels_are_added_without_replacing_ours() -> None:
    seen: list[Node] = []

    class SiteLabels:
        @hookimpl
        def accelkit_node_labels(self, node: Node) -> dict[str, str]:
            seen.append(node)
            return {"site/rack": "r12", "accelkit/acme.count": "99"}

    plugins = registry.Registry([Provides([AcmeManager()]), SiteLabels()], autoload=False)
    node = detect_node(acme_host(), registry=plugins)
    assert node.labels["site/rack"] == "r12"
    assert node.labels["accelkit/acme.count"] == "2"
    assert seen[0].resources["GPU"] == 2.0


def test_bad_additional_resources_are_warnings(use_managers: MakeManagers) -> None:
    def extra(self: object, devices: object, host: object) -> dict[object, object]:
        return {"GPU": 1, "slice": -1, 3: 1, "ok": 1}

    use_managers(static_manager("chip", "GPU", [Device("0")], additional_resources=extra))
    node = detect_node(FakeHost())
    assert node.resources == {"GPU": 1.0, "ok": 1.0}
    assert len(levels(node, "warning")) == 3


def test_host_none_means_this_machine(
    use_managers: MakeManagers, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[object] = []

    def detect(self: object, host: object) -> list[Device]:
        seen.append(host)
        return []

    use_managers(static_manager("chip", "CHIP", [], detect=detect))
    monkeypatch.delenv(OVERRIDE_ENV, raising=False)
    monkeypatch.delenv(EXCLUDE_ENV, raising=False)
    assert detect_node().devices == []
    assert isinstance(seen[0], HostView)
    assert type(seen[0].inner).__name__ == "LocalHost"


def test_each_manager_sees_only_the_variables_it_declares(
    use_managers: MakeManagers, sandbox: Path
) -> None:
    """Host shows a manager only its declared variables, so a replay detects the same."""
    seen: dict[str, dict[str, str]] = {}

    def detect(self: AcceleratorManager, host: Host) -> list[Device]:
        seen[self.name] = dict(host.env)
        assert host.read_text("/etc/hello") == "hi"  # files, commands, modules: unchanged
        assert host.run(["tool"]).stdout == "out"
        return [Device("0")]

    def labels(self: AcceleratorManager, devices: object, host: Host) -> dict[str, str]:
        return {"saw": ",".join(sorted(host.env))}

    use_managers(
        static_manager("chip", "CHIP", [], detect=detect, env_vars_read=("CHIP_A", "CHIP_B"),
                       labels=labels),
        static_manager("card", "CARD", [], detect=detect, visible_devices_env_var="CARD_V"),
    )  # fmt: skip
    (sandbox / "etc").mkdir()
    (sandbox / "etc/hello").write_text("hi")
    env = {"CHIP_A": "1", "CARD_V": "0", "HOME": "/root", "AWS_SECRET": "x", OVERRIDE_ENV: "{}"}
    node = detect_node(FakeHost(root=sandbox, env=env, commands={"tool": (0, "out")}))
    assert seen == {"chip": {"CHIP_A": "1"}, "card": {"CARD_V": "0"}}
    assert node.labels["accelkit/chip.saw"] == "CHIP_A"


def test_widget_manager_is_found_through_dev(generic: object, sandbox: Path) -> None:
    (sandbox / "dev").mkdir()
    for name in ("widget10", "widget2", "null"):
        (sandbox / "dev" / name).write_text("")
    node = detect_node(FakeHost(root=sandbox))
    assert ids(node, "widget") == ["2", "10"]
    assert isinstance(WidgetManager(), WidgetManager) and isinstance(RivalManager(), RivalManager)


def test_a_finding_noted_twice_is_listed_once(use_managers: MakeManagers) -> None:
    """Two layers that both find the vendor command missing say so once (`accelkit ls -v`)."""

    def detect(self: AcceleratorManager, host: Host) -> list[Device]:
        note("chip-smi is not installed")
        note("chip-smi is not installed")
        note("chip-smi is not installed", "warning")  # another level is another finding
        return []

    use_managers(static_manager("chip", "CHIP", [], detect=detect))
    node = detect_node(FakeHost())
    assert [(d.level, d.message) for d in node.diagnostics] == [
        ("info", "chip-smi is not installed"),
        ("warning", "chip-smi is not installed"),
    ]
