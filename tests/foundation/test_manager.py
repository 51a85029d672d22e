"""The AcceleratorManager defaults a typical plugin relies on, and its contract check."""

from __future__ import annotations

import pytest
from accelkit import (
    ALIGNED_BLOCKS,
    AcceleratorManager,
    Device,
    FakeHost,
    Host,
    InvalidRequest,
)


class Widget(AcceleratorManager):
    name = "widget"
    resource_name = "WIDGET"
    visible_devices_env_var = "WIDGET_VISIBLE_DEVICES"

    def detect(self, host: Host) -> list[Device]:
        return []


class Block(Widget):
    name = "block"
    fractional = False
    allowed_quantities = (1, 2, 4, 8)
    placement = ALIGNED_BLOCKS


def test_defaults_read_and_write_the_primary_variable() -> None:
    manager = Widget()
    assert manager.all_env_vars_read() == ("WIDGET_VISIBLE_DEVICES",)
    assert manager.read_visible({}) is None
    assert manager.read_visible({"WIDGET_VISIBLE_DEVICES": " 1, 0"}) == ["1", "0"]
    assert manager.read_visible({"WIDGET_VISIBLE_DEVICES": "NoDevFiles"}) == []
    assert manager.visibility_env(["0", "2"]) == {"WIDGET_VISIBLE_DEVICES": "0,2"}
    assert manager.visibility_env([]) == {"WIDGET_VISIBLE_DEVICES": ""}


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


def test_accelerator_type_is_the_first_label() -> None:
    devices = [Device(id="0"), Device(id="1", type_label="T4"), Device(id="2", type_label="A100")]
    assert Widget().accelerator_type(devices) == "T4"
    assert Widget().accelerator_type([Device(id="0")]) is None


def test_a_valid_manager_has_no_contract_errors() -> None:
    assert Widget().contract_errors() == []
    assert Block().contract_errors() == []
    assert Widget().detect(FakeHost()) == []


def test_contract_errors_say_what_is_wrong() -> None:
    class Broken(AcceleratorManager):
        name = "Bad Name"
        resource_name = "accelerator_type"
        api_version = 99
        allowed_quantities = (0,)

    errors = "\n".join(Broken().contract_errors())
    assert "lowercase identifier" in errors
    assert "collides with accelerator_type" in errors
    assert "api_version is 99" in errors
    assert "allowed_quantities" in errors
    assert "must implement detect" in errors


def test_device_validates_its_id_and_round_trips() -> None:
    device = Device(id="GPU-1", index=0, memory_bytes=1 << 30, numa_node=1)
    assert Device.from_dict(device.to_dict()) == device
    with pytest.raises(ValueError, match="non-empty"):
        Device(id="")
    with pytest.raises(ValueError, match="whitespace or a comma"):
        Device(id="0,1")
    with pytest.raises(ValueError, match="a device has unknown keys"):
        Device.from_dict({"id": "0", "colour": "red"})
