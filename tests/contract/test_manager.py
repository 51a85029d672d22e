"""The AcceleratorManager contract (version 2): its seventeen members, the defaults a typical
plugin relies on, the registry's checks of it, and plugins written for version 1."""

from __future__ import annotations

import ast
import inspect
import textwrap
import warnings
from collections.abc import Sequence
from typing import Optional

import pytest
from accelkit import (
    ALIGNED_BLOCKS,
    API_VERSION,
    CONTIGUOUS,
    LOWEST_FREE,
    AcceleratorManager,
    Device,
    FakeHost,
    Frameworks,
    Host,
    InvalidRequest,
    Placement,
    PluginWarning,
    Registry,
    Scheduling,
    hookimpl,
)
from accelkit.registry import contract_errors, family_policy, variables_read, version_1_note
from accelkit.registry._contract import call_errors

CONTRACT = [
    # the card's five: detection, resource name, visibility variable, fractional support (the
    # type label is Device.type_label)
    "name",
    "resource_name",
    "detect",
    "visible_devices_env_var",
    "fractional",
    # declarations
    "env_vars_read",
    "scheduling",
    "frameworks",
    "replaces",
    "api_version",
    # overridable methods with defaults
    "read_visible",
    "visibility_env",
    "matches",
    "accelerator_type",
    "additional_resources",
    "labels",
    # the one final helper
    "validate_quantity",
]


class Widget(AcceleratorManager):
    name = "widget"
    resource_name = "WIDGET"
    visible_devices_env_var = "WIDGET_VISIBLE_DEVICES"
    api_version = 2

    def detect(self, host: Host) -> list[Device]:
        return []


class Block(Widget):
    name = "block"
    fractional = False
    scheduling = Scheduling(allowed_quantities=(1, 2, 4, 8), placement=ALIGNED_BLOCKS)


def test_the_contract_has_seventeen_members_the_cards_five_first() -> None:
    public = [n for n in vars(AcceleratorManager) if not n.startswith("_")]
    public += [n for n in AcceleratorManager.__annotations__ if n not in public]
    assert sorted(public) == sorted(CONTRACT)
    assert len(CONTRACT) == 17
    inherited = [n for n in dir(AcceleratorManager) if not n.startswith("_")]
    assert set(inherited) <= set(CONTRACT)  # nothing public but the contract, even inherited
    body = ast.parse(textwrap.dedent(inspect.getsource(AcceleratorManager))).body[0]
    assert isinstance(body, ast.ClassDef)
    in_source_order = [_member_name(statement) for statement in body.body]
    assert [n for n in in_source_order if n in CONTRACT] == CONTRACT


def _member_name(statement: ast.stmt) -> Optional[str]:
    """The name a class-body statement defines (None for a docstring)."""
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return statement.name
    if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
        return statement.target.id
    if isinstance(statement, ast.Assign) and isinstance(statement.targets[0], ast.Name):
        return statement.targets[0].id
    return None


def test_records_are_frozen_with_typical_defaults() -> None:
    assert Widget().scheduling == Scheduling(None, LOWEST_FREE, 1, None)
    assert Widget().frameworks == Frameworks()
    with pytest.raises(AttributeError):
        Scheduling().placement = CONTIGUOUS  # type: ignore[misc]
    with pytest.raises(AttributeError):
        Frameworks().device = "cuda"  # type: ignore[misc]


def test_defaults_read_and_write_the_primary_variable() -> None:
    manager = Widget()
    assert variables_read(manager) == ("WIDGET_VISIBLE_DEVICES",)
    assert manager.read_visible({}) is None
    assert manager.read_visible({"WIDGET_VISIBLE_DEVICES": " 1, 0"}) == ["1", "0"]
    assert manager.read_visible({"WIDGET_VISIBLE_DEVICES": "NoDevFiles"}) == []
    assert manager.visibility_env(["0", "2"], total=4) == {"WIDGET_VISIBLE_DEVICES": "0,2"}
    assert manager.visibility_env([], total=4) == {"WIDGET_VISIBLE_DEVICES": ""}


def test_matches_by_id_index_or_uuid() -> None:
    device = Device(id="3", index=3, uuid="W-1234")
    manager = Widget()
    assert manager.matches("3", device)
    assert manager.matches("W-1234", device)
    assert not manager.matches("W-12", device)
    assert not manager.matches("2", device)


def test_quantity_rules_follow_the_declaration() -> None:
    assert Widget().validate_quantity(0.25) == 2_500
    assert Widget().validate_quantity(3) == 30_000
    assert Block().validate_quantity(4) == 40_000
    with pytest.raises(InvalidRequest, match=r"0\.5 is fractional.*ask for 1, 2, 4, 8"):
        Block().validate_quantity(0.5)
    with pytest.raises(
        InvalidRequest, match=r"WIDGET quantity 3 is not allowed: ask for 1, 2, 4, 8"
    ):
        Block().validate_quantity(3)


def test_the_policy_is_the_declarations_as_data() -> None:
    policy = family_policy(Block())
    assert (policy.name, policy.resource_name, policy.fractional) == ("block", "WIDGET", False)
    assert policy.allowed_quantities == (1, 2, 4, 8)
    assert policy.placement is ALIGNED_BLOCKS
    assert policy.visible_devices_env_var == "WIDGET_VISIBLE_DEVICES"
    assert policy.validate_quantity(2) == Block().validate_quantity(2)


def test_accelerator_type_is_the_label_every_device_has() -> None:
    t4s = [Device(id="0", type_label="T4"), Device(id="1", type_label="T4")]
    assert Widget().accelerator_type(t4s) == "T4"
    # several types, or some devices untyped (an override's logical ones): no one type
    assert Widget().accelerator_type([*t4s, Device(id="2", type_label="A100")]) is None
    assert Widget().accelerator_type([*t4s, Device(id="2")]) is None
    assert Widget().accelerator_type([Device(id="0")]) is None
    assert Widget().accelerator_type([]) is None


def test_a_valid_manager_has_no_contract_errors() -> None:
    assert contract_errors(Widget()) == []
    assert contract_errors(Block()) == []
    assert Widget().detect(FakeHost()) == []


def test_contract_errors_say_what_is_wrong() -> None:
    class Broken(AcceleratorManager):
        name = "Bad Name"
        resource_name = "accelerator_type"
        api_version = 99
        scheduling = Scheduling(allowed_quantities=(0,), placement=Placement())

    errors = "\n".join(contract_errors(Broken()))
    assert "lowercase identifier" in errors
    assert "collides with accelerator_type" in errors
    assert (
        "api_version is 99; this accelkit supports 1..2: upgrade accelkit, or install a "
        "release of the plugin written for this one" in errors
    )
    assert "scheduling.allowed_quantities must be positive whole numbers" in errors
    assert "scheduling.placement must be one of accelkit.LOWEST_FREE" in errors
    assert "must implement detect" in errors


@pytest.mark.parametrize("version", [0, "2", True])
def test_an_api_version_that_is_no_version_says_which_to_declare(version: object) -> None:
    class Odd(AcceleratorManager):
        name = "odd"
        resource_name = "ODD"

        def detect(self, host: Host) -> list[Device]:
            return []

    Odd.api_version = version  # type: ignore[assignment]
    said = f"Odd.api_version is {version!r}; this accelkit supports 1..2: declare api_version = 2"
    assert contract_errors(Odd()) == [said]


def test_rules_are_data_only_a_version_2_manager_may_not_code_them() -> None:
    class Picky(Widget):
        frameworks = "cuda"  # type: ignore[assignment]
        allowed_quantities = (1, 2)  # a version 1 attribute, not read at version 2

        def validate_quantity(self, quantity: object) -> int:  # type: ignore[misc]
            return 10_000

    errors = "\n".join(contract_errors(Picky()))
    assert "overrides validate_quantity" in errors
    assert "declare fractional and scheduling.allowed_quantities instead" in errors
    assert "Picky.allowed_quantities is a contract version 1 attribute" in errors
    assert "use scheduling.allowed_quantities" in errors
    assert "frameworks must be an accelkit.Frameworks" in errors


def test_a_version_2_visibility_env_must_take_total() -> None:
    class NoTotal(Widget):
        def visibility_env(self, ids):  # type: ignore[no-untyped-def,override]
            return {"WIDGET_VISIBLE": ",".join(ids)}

    class Takes(Widget):
        def visibility_env(self, ids, *, total=None):  # type: ignore[no-untyped-def,override]
            return {"WIDGET_VISIBLE": ",".join(ids)}

    class TakesAny(Widget):
        def visibility_env(self, ids, **options):  # type: ignore[no-untyped-def,override]
            return {"WIDGET_VISIBLE": ",".join(ids)}

    class OldNoTotal(NoTotal):
        api_version = 1

    assert call_errors(NoTotal()) == [
        "NoTotal.visibility_env must take the keyword total (visibility_env(self, ids, *, "
        "total=None)): accelkit passes it at api_version 2"
    ]
    assert contract_errors(NoTotal()) == []  # a declaration check, which the kit runs alone
    assert call_errors(Takes()) == call_errors(TakesAny()) == call_errors(Widget()) == []
    assert call_errors(OldNoTotal()) == []  # version 1 is called with ids alone


class OldStyle(AcceleratorManager):
    """A plugin written for contract version 1: old attributes, no ``total``."""

    name = "oldstyle"
    resource_name = "OLD"
    visible_devices_env_var = "OLD_VISIBLE_DEVICES"
    fractional = False
    allowed_quantities = (1, 2, 4)
    placement = ALIGNED_BLOCKS
    partitions_per_grant = None
    device_file = "/dev/old{id}"
    framework_device = "old"
    framework_device_indexed = False
    collective_backend = "oldccl"
    framework_memory_hints = True
    shared_visibility = True
    nothing_visible = ("", "none")

    def detect(self, host: Host) -> list[Device]:
        return [Device(str(n)) for n in range(4)]

    def visibility_env(self, ids: Sequence[str]) -> dict[str, Optional[str]]:  # type: ignore[override]
        return {"OLD_VISIBLE_DEVICES": ",".join(ids)}


@hookimpl
def accelkit_register_managers() -> list[AcceleratorManager]:
    return [OldStyle()]


def test_a_version_1_plugin_keeps_working_with_one_deprecation_note() -> None:
    import sys

    registry = Registry(plugins=[sys.modules[__name__]], autoload=False)
    with pytest.warns(PluginWarning, match="contract version 1") as caught:
        manager = registry.get_manager("oldstyle")
    notes = [str(w.message) for w in caught if "contract version 1" in str(w.message)]
    assert len(notes) == 1
    note = notes[0]
    for old, new in [
        ("allowed_quantities", "scheduling.allowed_quantities"),
        ("placement", "scheduling.placement"),
        ("partitions_per_grant", "scheduling.partitions_per_grant"),
        ("device_file", "scheduling.device_file"),
        ("framework_device", "frameworks.device"),
        ("framework_device_indexed", "frameworks.indexed"),
        ("collective_backend", "frameworks.collective"),
        ("framework_memory_hints", "frameworks.memory_hints"),
        ("shared_visibility", "frameworks.shared_visibility"),
        ("nothing_visible", "a rule in read_visible()"),
    ]:
        assert f"{old} -> {new}" in note
    assert f"declare api_version = {API_VERSION}" in note
    (info,) = [i for i in registry.report() if i.name == __name__.rpartition(".")[2]]
    assert info.status == "ok"
    assert note == f"{info.describe()}: {version_1_note(manager)}"  # as the kit says it too
    assert info.notes == (version_1_note(manager),)
    assert contract_errors(manager) == []

    # read once into the records: everything after loading sees one contract
    assert manager.scheduling == Scheduling((1, 2, 4), ALIGNED_BLOCKS, None, "/dev/old{id}")
    assert manager.frameworks == Frameworks("old", False, "oldccl", True, True)
    assert manager.validate_quantity(4) == 40_000
    with pytest.raises(InvalidRequest, match="ask for 1, 2, 4"):
        manager.validate_quantity(8)
    # version 1's default read_visible honoured its own "nothing visible" values
    assert manager.read_visible({"OLD_VISIBLE_DEVICES": "none"}) == []
    assert manager.read_visible({"OLD_VISIBLE_DEVICES": "1,2"}) == ["1", "2"]

    # and it schedules: aligned blocks, its env written without ``total``
    import accelkit

    node = accelkit.detect_node(FakeHost(), registry=registry)
    assert node.resources["OLD"] == 4.0
    grant = accelkit.Allocator(node, registry=registry).acquire({"OLD": 2})
    assert grant is not None and grant.ids == {"OLD": ["0", "1"]}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert grant.env({}, registry=registry)["OLD_VISIBLE_DEVICES"] == "0,1"


def test_device_validates_its_id_and_round_trips() -> None:
    device = Device(id="GPU-1", index=0, memory_bytes=1 << 30, numa_node=1)
    assert Device.from_dict(device.to_dict()) == device
    with pytest.raises(ValueError, match="non-empty"):
        Device(id="")
    with pytest.raises(ValueError, match="whitespace or a comma"):
        Device(id="0,1")
    with pytest.raises(ValueError, match="a device has unknown keys"):
        Device.from_dict({"id": "0", "colour": "red"})
