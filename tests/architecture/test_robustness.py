"""Regression tests for the defect classes hostile input found (issue 14, "Robustness").

Each test is one class: its cost stays bounded and is reported, a grant is never wrong, only the
documented errors (``accelkit.errors``) come out, a plugin's fault stays its own, and garbage
never passes for an answer. No test here asserts a time: a bounded cost shows as a bounded count.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Optional

import accelkit
import probe_targets
import pytest
from accelkit import (
    AcceleratorManager,
    Allocator,
    ConfigurationError,
    Device,
    FakeHost,
    Grant,
    Host,
    InvalidData,
    InvalidRequest,
    Node,
    PluginError,
    detect_node,
    hookimpl,
)
from accelkit.detect import MAX_DEVICES, call_probe, device_count
from accelkit.diagnostics import MAX_NOTES, collecting, note
from accelkit.host import load_snapshot
from accelkit.registry import Registry
from accelkit.testing.fakes import nvidia as fake_nvidia
from accelkit_plugins.nvidia import NVIDIA_SMI
from accelkit_plugins.nvidia import testing as nvidia_hosts

NODES = Path(__file__).resolve().parents[2] / "examples" / "nodes"


def only(*managers: AcceleratorManager) -> Registry:
    """A registry of exactly ``managers``."""

    class Plugin:
        @hookimpl
        def accelkit_register_managers(self) -> list[AcceleratorManager]:
            return list(managers)

    return Registry([Plugin()], autoload=False)


def messages(node: Node, level: Optional[str] = None) -> list[str]:
    return [d.message for d in node.diagnostics if level is None or d.level == level]


# -- cost that explodes -------------------------------------------------------------------------
def test_garbage_output_makes_a_bounded_number_of_findings_and_says_how_many_were_cut() -> None:
    junk = "".join(f"junk line {n}\n" for n in range(20_000))
    node = detect_node(FakeHost(commands={"nvidia-smi": (0, junk)}))
    nvidia = [d for d in node.diagnostics if d.family == "nvidia"]
    assert len(nvidia) <= MAX_NOTES + 5  # one collection per detection step at most
    assert any("further finding(s) were cut" in d.message for d in nvidia)


def test_a_finding_is_kept_once_per_family() -> None:
    with collecting("x") as notes:
        for _ in range(3):
            note("same")
    assert [n.message for n in notes] == ["same"]


def test_a_family_detecting_more_than_max_devices_is_cut_with_an_error() -> None:
    rows = "".join(
        f"{i}, GPU-{i:08d}, NVIDIA H100, 81559, 00000000:{i % 256:02x}:00.0, Disabled\n"
        for i in range(MAX_DEVICES + 10)
    )
    node = detect_node(FakeHost(commands={NVIDIA_SMI: (0, rows)}))
    assert len(node.devices) == MAX_DEVICES
    assert any("keeping the first" in m for m in messages(node, "error"))


@pytest.mark.parametrize("count", [-1, MAX_DEVICES + 1, 10**9, "8", True, None])
def test_device_count_refuses_garbage_counts(count: object) -> None:
    with pytest.raises(ValueError, match="not a count from 0 to"):
        device_count(count, "the count")


def test_an_nvml_count_of_minus_one_fails_its_layer_so_the_next_one_answers() -> None:
    gpus = fake_nvidia.fake_gpus(2)
    nvml = fake_nvidia.fake_pynvml(gpus)
    nvml.nvmlDeviceGetCount = lambda: -1  # type: ignore[attr-defined]
    host = FakeHost(
        modules={"pynvml": nvml},
        commands={NVIDIA_SMI: (0, nvidia_hosts.nvidia_smi_output(gpus))},
    )
    node = detect_node(host)
    assert [d.source for d in node.devices] == ["command", "command"]
    assert any("NVML's device count is -1" in m for m in messages(node))


def test_a_huge_vendor_count_creates_no_devices() -> None:
    listing = "NPU ID : 0\nProduct Name : Atlas\nChip Count : 1000000000\n"
    node = detect_node(FakeHost(commands={("npu-smi", "info", "-l"): (0, listing)}))
    assert [d for d in node.devices if d.family == "ascend"] == []
    assert any("not a count from 0 to" in m for m in messages(node))


@pytest.mark.parametrize("count", [1e9, 10**30, MAX_DEVICES + 1])
def test_an_unbounded_override_is_a_configuration_error(count: object) -> None:
    with pytest.raises(ConfigurationError, match=r"at most|largest quantity"):
        detect_node(FakeHost(), overrides={"GPU": count})


def test_a_huge_numeric_device_id_is_no_bit_position() -> None:
    node = detect_node(FakeHost(env={"TPU_VISIBLE_CHIPS": "99999999999"}))
    grant = Allocator(node).acquire({"TPU": 1})
    assert grant is not None and grant.ids == {"TPU": ["99999999999"]}


def test_a_visibility_list_longer_than_max_devices_is_cut() -> None:
    value = ",".join(str(n) for n in range(MAX_DEVICES + 5))
    node = detect_node(FakeHost(env={"TPU_VISIBLE_CHIPS": value}))
    assert len([d for d in node.devices if d.family == "tpu"]) == MAX_DEVICES
    assert any("keeping the first" in m for m in messages(node, "warning"))


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (Decimal("1e999999999"), "largest quantity"),
        (Decimal("-1e999999999"), "largest quantity"),
        (Decimal("sNaN"), "finite"),
        (10**5000, "largest quantity"),
        (float(2**60), "largest quantity"),
    ],
    ids=["decimal-huge", "decimal-huge-negative", "snan", "int-5000-digits", "float-2**60"],
)
def test_extreme_quantities_are_refused_at_once(value: object, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        accelkit.validate_request({"GPU": value})
    with pytest.raises(ConfigurationError, match=message):
        detect_node(FakeHost(), overrides={"memory": value})


# -- wrong grants --------------------------------------------------------------------------------
def test_node_json_with_a_device_twice_is_refused() -> None:
    data = detect_node(FakeHost(), overrides={"GPU": 2}).to_dict()
    data["devices"].append(data["devices"][0])
    with pytest.raises(InvalidData, match="twice"):
        Node.from_dict(data)


@pytest.mark.parametrize(
    ("variable", "value", "resource"),
    [("TPU_VISIBLE_CHIPS", "9,09", "TPU"), ("HABANA_VISIBLE_MODULES", "1,01", "HPU")],
)
def test_aliasing_tokens_name_one_device(variable: str, value: str, resource: str) -> None:
    node = detect_node(FakeHost(env={variable: value}))
    assert node.resources[resource] == 1
    assert any("the same device" in m for m in messages(node, "warning"))
    allocator = Allocator(node)
    assert allocator.acquire({resource: 1}) is not None
    assert allocator.acquire({resource: 1}) is None  # one chip, never granted twice


def test_a_mig_parent_index_in_the_visibility_variable_takes_no_other_gpu() -> None:
    mig = fake_nvidia.FakeMig("MIG-11111111-2222-3333-4444-000000000001")
    gpus = fake_nvidia.fake_gpus(2)
    gpus[0] = dataclasses.replace(gpus[0], name="NVIDIA A100-SXM4-40GB", migs=[mig], mig_mode=1)
    host = FakeHost(
        modules={"pynvml": fake_nvidia.fake_pynvml(gpus)},
        env={"CUDA_VISIBLE_DEVICES": "1,0"},
    )
    node = detect_node(host)
    assert [d.id for d in node.devices] == ["1"]
    assert any("partitions are listed in its place" in m for m in messages(node, "warning"))
    assert Allocator(node).acquire({"GPU": 1}) is not None


@pytest.mark.parametrize("value", ["²", "٣", "1,²"])
def test_unicode_digits_are_no_cuda_index(value: str) -> None:
    manager = accelkit.get_manager("nvidia")
    assert manager.read_visible({"CUDA_VISIBLE_DEVICES": value}) == value.split(",")[:-1][:1]


# -- undocumented exceptions ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "change",
    [
        {"id": 5},
        {"index": "x"},
        {"index": True},
        {"memory_bytes": "x"},
        {"family": 3},
        {"type_label": ["H100"]},
    ],
)
def test_device_values_of_the_wrong_type_are_invalid_data(change: dict[str, Any]) -> None:
    data = detect_node(FakeHost(), overrides={"GPU": 1}).to_dict()
    data["devices"][0].update(change)
    with pytest.raises(InvalidData, match="malformed device"):
        Node.from_dict(data)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("resources", {"GPU": 10**400}),
        ("resources", {"GPU": "x"}),
        ("resources", {"GPU": float("nan")}),
        ("labels", {"a": [1]}),
        ("detected", {"nvidia": -1}),
        ("families", {"nvidia": {"resource_name": "GPU", "placement": ["x"]}}),
        ("diagnostics", [{"family": "a", "level": "fatal", "message": "m"}]),
    ],
)
def test_node_values_of_the_wrong_kind_are_invalid_data(key: str, value: object) -> None:
    data = detect_node(FakeHost(), overrides={"GPU": 1}).to_dict()
    data[key] = value
    with pytest.raises(InvalidData):
        Node.from_dict(data)


@pytest.mark.parametrize(
    "key", ["token", "resources", "devices", "families", "family_sizes", "schema_version"]
)
def test_grant_values_of_the_wrong_kind_are_invalid_data(key: str) -> None:
    node = detect_node(FakeHost(), overrides={"GPU": 2})
    grant = Allocator(node).acquire({"GPU": 1})
    assert grant is not None
    data = json.loads(json.dumps(grant.to_dict()))
    data[key] = "garbage" if key != "token" else 1.5
    with pytest.raises(InvalidData):
        Grant.from_dict(data)


def test_restoring_a_grant_of_an_unknown_family_is_an_invalid_request() -> None:
    node = detect_node(FakeHost(), overrides={"GPU": 2})
    grant = Allocator(node).acquire({"GPU": 1})
    assert grant is not None
    data = grant.to_dict()
    data["devices"][0]["device"]["family"] = "nobody"
    with pytest.raises(InvalidRequest, match="nobody"):
        Allocator(node).restore([Grant.from_dict(data)])


def test_deeply_nested_override_json_is_a_configuration_error() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(ConfigurationError, match="not JSON"):
        detect_node(FakeHost(env={"ACCELKIT_OVERRIDE_RESOURCES": deep}))


@pytest.mark.parametrize(
    "manifest",
    [
        "[" * 100_000 + "]" * 100_000,
        '{"format": "accelkit-snapshot", "version": 1, "commands": [{"argv": ["x"], "error": []}]}',
        '{"format": "accelkit-snapshot", "version": 1, "env": []}',
        '{"format": "accelkit-snapshot", "version": 1, "commands": [{"argv": "x"}]}',
        "[]",
        "\x00\x01",
    ],
)
def test_a_malformed_snapshot_manifest_is_invalid_data(tmp_path: Path, manifest: str) -> None:
    (tmp_path / "snapshot.json").write_text(manifest)
    with pytest.raises(InvalidData):
        load_snapshot(tmp_path)


def test_a_manifest_that_is_a_directory_is_invalid_data(tmp_path: Path) -> None:
    (tmp_path / "snapshot.json").mkdir()
    with pytest.raises(InvalidData, match="cannot be read"):
        load_snapshot(tmp_path)


# -- a plugin can break everyone ------------------------------------------------------------------
class Widget(AcceleratorManager):
    """A family whose every answer can be made garbage, one method at a time."""

    name = "widget"
    resource_name = "WIDGET"
    visible_devices_env_var = "WIDGET_VISIBLE"

    def __init__(self, **broken: Any) -> None:
        self.broken = broken

    def _answer(self, method: str, default: Any) -> Any:
        answer = self.broken.get(method, default)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def detect(self, host: Host) -> list[Device]:
        return self._answer("detect", [Device("0"), Device("1")])  # type: ignore[no-any-return]

    def labels(self, devices: Sequence[Device], host: Host) -> dict[str, str]:
        return self._answer("labels", {"ok": "yes"})  # type: ignore[no-any-return]

    def additional_resources(self, devices: Sequence[Device], host: Host) -> dict[str, float]:
        return self._answer("additional_resources", {})  # type: ignore[no-any-return]

    def accelerator_type(self, devices: Sequence[Device]) -> Optional[str]:
        return self._answer("accelerator_type", None)  # type: ignore[no-any-return]

    def read_visible(self, env: Any) -> Optional[list[str]]:
        return self._answer("read_visible", super().read_visible(env))  # type: ignore[no-any-return]

    def validate_quantity(self, quantity: object) -> int:
        return self._answer("validate_quantity", super().validate_quantity(quantity))  # type: ignore[no-any-return]

    def visibility_env(
        self, ids: Sequence[str], *, total: Optional[int] = None
    ) -> dict[str, Optional[str]]:
        return self._answer("visibility_env", {"WIDGET_VISIBLE": ",".join(ids)})  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    "broken",
    [
        {"labels": ["not", "a", "mapping"]},
        {"labels": "ok=yes"},
        {"additional_resources": 3},
        {"additional_resources": {"TPU slice": 1}},  # a blank: no request could name it
        {"accelerator_type": 5},
        {"read_visible": "0,1"},
        {"read_visible": [0, 1]},
        {"detect": SystemExit(3)},
        {"detect": [Device("0", type_label=None), "not a device"]},
    ],
    ids=lambda broken: next(iter(broken)),
)
def test_a_plugin_answering_garbage_is_reported_and_the_node_still_builds(
    broken: dict[str, Any],
) -> None:
    registry = only(Widget(**broken))
    node = detect_node(FakeHost(env={"WIDGET_VISIBLE": "1"}), registry=registry)
    assert any(d.family == "widget" and d.level != "info" for d in node.diagnostics)
    Allocator(node, registry=registry).available()  # consistent enough to allocate over


def test_a_non_string_type_label_is_refused_where_the_device_is_made() -> None:
    with pytest.raises(ValueError, match="type_label must be a str"):
        Device("0", type_label=5)  # type: ignore[arg-type]


def test_sys_exit_while_a_plugin_loads_is_a_load_error() -> None:
    class Exits:
        @hookimpl
        def accelkit_register_managers(self) -> list[AcceleratorManager]:
            raise SystemExit(1)

    registry = Registry([Exits()], autoload=False)
    with pytest.warns(accelkit.PluginWarning, match="SystemExit"):
        assert registry.managers() == []
    assert [r.status for r in registry.report()] == ["error"]


@pytest.mark.parametrize("answer", ["1", 1.5, -1, True, RuntimeError("broken")])
def test_a_quantity_rule_patched_onto_a_manager_is_never_called(answer: object) -> None:
    """Quantity rules are data (contract version 2): allocation applies the declared policy, so
    garbage a manager's ``validate_quantity`` would answer cannot reach it."""
    registry = only(Widget(validate_quantity=answer))
    node = detect_node(FakeHost(), registry=registry)
    grant = Allocator(node, registry=registry).acquire({"WIDGET": 1})
    assert grant is not None and grant.resources == {"WIDGET": 1.0}


@pytest.mark.parametrize("answer", [["x"], {"WIDGET_VISIBLE": 3}, {1: "x"}, KeyError("k")])
def test_garbage_from_visibility_env_is_a_plugin_error(answer: object) -> None:
    registry = only(Widget(visibility_env=answer))
    node = detect_node(FakeHost(), registry=registry)
    grant = Allocator(node, registry=registry).acquire({"WIDGET": 1})
    assert grant is not None
    with pytest.raises(PluginError, match="widget plugin's visibility_env"):
        grant.env(base_env={}, registry=registry)


# -- silent wrong answers --------------------------------------------------------------------------
def test_empty_looking_amdsmi_handles_do_not_hide_later_layers() -> None:
    amdsmi = SimpleNamespace(
        amdsmi_init=lambda: None,
        amdsmi_shut_down=lambda: None,
        amdsmi_get_processor_handles=lambda: "",
    )
    node = detect_node(FakeHost(modules={"amdsmi": amdsmi}))
    assert any("amdsmi_get_processor_handles() returned ''" in m for m in messages(node))


@pytest.mark.parametrize("local", [False, True], ids=["fakehost", "probe-process"])
def test_import_error_inside_a_library_call_is_a_failure_not_not_installed(local: bool) -> None:
    host: Host = accelkit.LocalHost() if local else FakeHost(modules={"json": json})
    with collecting("x") as notes:
        assert call_probe(host, probe_targets.import_error_inside_a_call, timeout=30) is None
        assert call_probe(host, probe_targets.need_missing_library, timeout=30) is None
    failed, missing = (n.message for n in notes)
    assert "failed" in failed and "libfoo.so" in failed and "not installed" not in failed
    assert "library not installed" in missing


def test_an_intel_affinity_mask_is_never_written_as_a_selector_term() -> None:
    node = detect_node(FakeHost(env={"ZE_AFFINITY_MASK": "x:1,1"}))
    grant = Allocator(node).acquire({"GPU": 1})
    assert grant is not None
    env = grant.env(base_env={})
    assert env.get("ONEAPI_DEVICE_SELECTOR", "level_zero:1") == "level_zero:1"


def test_a_resource_name_with_a_blank_is_refused_as_an_override() -> None:
    with pytest.raises(ConfigurationError, match="without blanks"):
        detect_node(FakeHost(), overrides={"my slice": 1})
