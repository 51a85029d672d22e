"""The Intel Gaudi plugin: its data sheet, each detection layer, the fake host and the snapshot."""

from __future__ import annotations

import pathlib
from collections.abc import Sequence

import accelkit
import pytest
from accelkit.detect import type_label
from accelkit.diagnostics import Diagnostic, collecting
from accelkit.host import CommandSpec, load_snapshot
from accelkit.registry import contract_errors, variables_read
from accelkit_plugins.gaudi import TYPE_LABELS, GaudiManager
from accelkit_plugins.gaudi import testing as fake
from hypothesis import given, settings
from hypothesis import strategies as st

SNAPSHOT = pathlib.Path(__file__).parents[2] / "examples" / "nodes" / "gaudi2-8"
MANAGER = GaudiManager()


def detect(host: accelkit.Host) -> tuple[list[accelkit.Device], list[Diagnostic]]:
    with collecting(MANAGER.name) as notes:
        devices = MANAGER.detect(host)
    return devices, notes


def host_with(
    root: pathlib.Path,
    hl_smi: CommandSpec | None = None,
    env: dict[str, str] | None = None,
) -> accelkit.FakeHost:
    commands = {} if hl_smi is None else {fake.HL_SMI_ARGV: hl_smi}
    return accelkit.FakeHost(root=root, env=env, commands=commands)


def texts(notes: Sequence[Diagnostic]) -> str:
    return "\n".join(f"{n.level}: {n.message}" for n in notes)


# -- part 1: the data sheet --------------------------------------------------------------------
def test_declares_the_gaudi_family() -> None:
    assert contract_errors(MANAGER) == []
    assert (MANAGER.name, MANAGER.resource_name) == ("gaudi", "HPU")
    assert MANAGER.visible_devices_env_var == "HABANA_VISIBLE_MODULES"
    assert set(variables_read(MANAGER)) == {"HABANA_VISIBLE_MODULES", "HABANA_VISIBLE_DEVICES"}
    assert (MANAGER.frameworks.device, MANAGER.frameworks.collective) == ("hpu", "hccl")
    assert accelkit.get_manager("gaudi").resource_name == "HPU"


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, None),
        ({"HABANA_VISIBLE_MODULES": ""}, []),
        ({"HABANA_VISIBLE_MODULES": "NoDevFiles"}, []),
        ({"HABANA_VISIBLE_MODULES": " 4, 5 ,6,7 "}, ["4", "5", "6", "7"]),
        ({"HABANA_VISIBLE_DEVICES": "0,1"}, None),
        ({"HABANA_VISIBLE_DEVICES": "all"}, None),
        ({"HABANA_VISIBLE_DEVICES": "0,1", "HABANA_VISIBLE_MODULES": "6,7"}, ["6", "7"]),
    ],
)
def test_reads_module_ids_never_the_container_layer(
    env: dict[str, str], expected: list[str] | None
) -> None:
    assert MANAGER.read_visible(env) == expected


def test_writes_module_ids_without_whitespace_and_leaves_the_container_layer() -> None:
    assert MANAGER.visibility_env(["2", "3"]) == {"HABANA_VISIBLE_MODULES": "2,3"}
    assert MANAGER.visibility_env([" 6", "7 "]) == {"HABANA_VISIBLE_MODULES": "6,7"}
    assert MANAGER.visibility_env([]) == {"HABANA_VISIBLE_MODULES": ""}


def test_a_token_names_a_module_never_a_position() -> None:
    fourth = accelkit.Device(id="1", index=3)
    assert MANAGER.matches("1", fourth)
    assert not MANAGER.matches("3", fourth)


@pytest.mark.parametrize("quantity", [1, 2, 4, 8, 0])
def test_whole_cards_in_allowed_group_sizes(quantity: int) -> None:
    assert MANAGER.validate_quantity(quantity) == quantity * 10_000


@pytest.mark.parametrize("quantity", [3, 5, 6, 16, 0.5, 0.25])
def test_other_quantities_are_refused_with_the_rule(quantity: float) -> None:
    with pytest.raises(accelkit.InvalidRequest, match="1, 2, 4, 8"):
        MANAGER.validate_quantity(quantity)


def test_a_fraction_above_one_is_refused() -> None:
    with pytest.raises(accelkit.InvalidRequest, match=r"1\.5"):
        MANAGER.validate_quantity(1.5)


def test_groups_are_aligned_in_module_id_space() -> None:
    assert MANAGER.scheduling.placement is accelkit.ALIGNED_BLOCKS
    # Devices in hl-smi index order: module ids, not positions, decide the groups.
    devices = [accelkit.Device(id=str(m)) for m in fake.MODULE_BY_INDEX]
    keys = MANAGER.scheduling.placement.keys(devices)
    assert keys == list(fake.MODULE_BY_INDEX)
    everything = sum(1 << k for k in keys)

    def modules(mask: int | None) -> set[int]:
        assert mask is not None
        return {k for k in keys if mask >> k & 1}

    assert modules(MANAGER.scheduling.placement.choose(everything, 2)) == {0, 1}
    assert modules(MANAGER.scheduling.placement.choose(everything & ~(1 << 1), 2)) == {2, 3}
    assert modules(MANAGER.scheduling.placement.choose(everything & ~(1 << 2), 4)) == {4, 5, 6, 7}
    assert MANAGER.scheduling.placement.choose(everything & ~(1 << 2) & ~(1 << 5), 4) is None
    assert modules(MANAGER.scheduling.placement.choose(everything, 8)) == set(range(8))


@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("HL-225", "Intel-GAUDI2"),
        ("HL-225B", "Intel-GAUDI2"),
        ("HL-325L", "Intel-GAUDI3"),
        ("HL-338", "Intel-GAUDI3"),
        ("HL-205", "Intel-GAUDI"),
        ("GAUDI2", "Intel-GAUDI2"),
        ("GAUDI2B", "Intel-GAUDI2"),
        ("GAUDI3", "Intel-GAUDI3"),
        ("GAUDI SEC", "Intel-GAUDI"),
        ("hl-225", "Intel-GAUDI2"),
        ("HL-1000", "Intel-HL-1000"),
        ("Future Gaudi X", "Intel-Future-Gaudi-X"),
        ("", None),
    ],
)
def test_type_labels(name: str, label: str | None) -> None:
    assert type_label(name, TYPE_LABELS, prefix="Intel") == label


# -- part 2: detection -------------------------------------------------------------------------
@pytest.mark.parametrize("count", [0, 1, 2, 4, 8])
def test_fake_host_has_exactly_count_cards(count: int, tmp_path: pathlib.Path) -> None:
    devices, _ = detect(fake.make_host(count, tmp_path))
    assert [d.id for d in devices] == [str(m) for m in range(count)]
    assert all(d.source == "command" and d.type_label == "Intel-GAUDI2" for d in devices)


def test_hl_smi_gives_module_ids_with_their_facts(tmp_path: pathlib.Path) -> None:
    cards = fake.fake_cards(8)
    devices, notes = detect(host_with(tmp_path, (0, fake.hl_smi_output(cards))))
    assert [d.id for d in devices] == [str(m) for m in range(8)]
    by_id = {d.id: d for d in devices}
    # Index 0 (the first bus id) is module 3 on the modelled board.
    assert by_id["3"].pci_bus_id == "0000:33:00.0"
    assert by_id["0"].pci_bus_id == "0000:4d:00.0"
    assert by_id["3"].model == "HL-225"
    assert by_id["3"].memory_bytes == 98304 * 2**20
    assert "8 device(s) from the command layer" in texts(notes)


def test_hl_smi_reports_mixed_models_per_card(tmp_path: pathlib.Path) -> None:
    output = "0, 0, HL-225, 0000:33:00.0, 98304 MiB\n1, 1, HL-325L, 0000:34:00.0, 131072 MiB\n"
    devices, _ = detect(host_with(tmp_path, (0, output)))
    assert [(d.id, d.type_label) for d in devices] == [("0", "Intel-GAUDI2"), ("1", "Intel-GAUDI3")]
    assert devices[1].memory_bytes == 131072 * 2**20


def test_hl_smi_row_without_a_module_id_is_not_offered(tmp_path: pathlib.Path) -> None:
    output = "0, N/A, HL-225, 0000:33:00.0, 98304 MiB\n1, 5, HL-225, 0000:34:00.0, N/A\n"
    devices, notes = detect(host_with(tmp_path, (0, output)))
    assert [d.id for d in devices] == ["5"]
    assert devices[0].memory_bytes is None
    assert "module id 'N/A'" in texts(notes)


@pytest.mark.parametrize(
    "failure",
    [
        (1, "", "hl-smi: failed to open device"),
        TimeoutError("hl-smi hung"),
        (0, "garbage without commas\n\x00\x01"),
        (0, ""),
    ],
)
def test_a_failing_hl_smi_falls_back_to_sysfs(failure: CommandSpec, tmp_path: pathlib.Path) -> None:
    cards = fake.fake_cards(4)
    fake.write_sysfs(tmp_path, cards)
    devices, _ = detect(host_with(tmp_path, failure))  # an empty answer says nothing: ask sysfs
    assert [d.id for d in devices] == ["0", "1", "2", "3"]
    assert {d.source for d in devices} == {"sysfs"}


def test_sysfs_with_module_ids(tmp_path: pathlib.Path) -> None:
    cards = fake.fake_cards(8)
    fake.write_sysfs(tmp_path, cards)
    devices, notes = detect(host_with(tmp_path))
    assert [d.id for d in devices] == [str(m) for m in range(8)]
    by_id = {d.id: d for d in devices}
    assert by_id["3"].pci_bus_id == "0000:33:00.0"
    assert by_id["3"].model == "GAUDI2"
    assert by_id["3"].type_label == "Intel-GAUDI2"
    assert by_id["4"].numa_node == 1
    assert "hl-smi is not installed" in texts(notes)


def test_older_habanalabs_class(tmp_path: pathlib.Path) -> None:
    cards = fake.fake_cards(2, device_type="GAUDI")
    fake.write_sysfs(tmp_path, cards, accel_class=False)
    (tmp_path / "sys/class/habanalabs/hl_controlD0").mkdir(parents=True)
    devices, _ = detect(host_with(tmp_path))
    assert [(d.id, d.type_label) for d in devices] == [("0", "Intel-GAUDI"), ("1", "Intel-GAUDI")]


def test_without_module_ids_cards_are_counted_never_named_by_index(
    tmp_path: pathlib.Path,
) -> None:
    fake.write_sysfs(tmp_path, fake.fake_cards(8), module_ids=False)
    devices, notes = detect(host_with(tmp_path))
    assert devices == []
    warning = next(n for n in notes if n.level == "warning")
    assert "8 of 8 Gaudi card(s)" in warning.message
    assert "module id" in warning.message and "hl-smi" in warning.message


def test_cards_seen_by_both_classes_count_once(tmp_path: pathlib.Path) -> None:
    cards = fake.fake_cards(2)
    fake.write_sysfs(tmp_path, cards)
    fake.write_sysfs(tmp_path, cards, accel_class=False)
    devices, _ = detect(host_with(tmp_path))
    assert [d.id for d in devices] == ["0", "1"]


def test_another_drivers_accel_device_is_not_a_gaudi(tmp_path: pathlib.Path) -> None:
    other = tmp_path / "sys/devices/pci0000:00/0000:00:0b.0"
    other.mkdir(parents=True)
    (other / "vendor").write_text("0x8086\n")
    (other / "module_id").write_text("0\n")
    (tmp_path / "sys/bus/pci/drivers/intel_vpu").mkdir(parents=True)
    (other / "driver").symlink_to("../../../bus/pci/drivers/intel_vpu")
    (other / "accel/accel0").mkdir(parents=True)
    (other / "accel/accel0/device").symlink_to("../..")
    (tmp_path / "sys/class/accel").mkdir(parents=True)
    (tmp_path / "sys/class/accel/accel0").symlink_to(
        "../../devices/pci0000:00/0000:00:0b.0/accel/accel0"
    )
    devices, notes = detect(host_with(tmp_path))
    assert devices == []
    assert "no detection layer answered" in texts(notes)


def test_unreadable_module_id_is_counted_as_unknown(tmp_path: pathlib.Path) -> None:
    cards = fake.fake_cards(2)
    fake.write_sysfs(tmp_path, cards)
    (tmp_path / f"sys/devices/pci0000:33/{cards[0].bus_id}/module_id").write_bytes(b"\x00\xff")
    devices, notes = detect(host_with(tmp_path))
    assert [d.id for d in devices] == ["0"]
    assert "1 of 2 Gaudi card(s)" in texts(notes)


def test_nothing_installed_is_zero_cards_with_a_reason() -> None:
    devices, notes = detect(accelkit.FakeHost())
    assert devices == []
    assert "hl-smi is not installed" in texts(notes)


def test_the_container_layer_does_not_change_detection(tmp_path: pathlib.Path) -> None:
    cards = fake.fake_cards(8)
    env = {"HABANA_VISIBLE_DEVICES": "0,1"}
    devices, _ = detect(host_with(tmp_path, (0, fake.hl_smi_output(cards)), env))
    assert len(devices) == 8


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300))
def test_any_hl_smi_output_gives_devices_or_nothing(output: str) -> None:
    devices, _ = detect(accelkit.FakeHost(commands={fake.HL_SMI_ARGV: (0, output)}))
    assert all(d.id.isdigit() for d in devices)


# -- part 3: the snapshot ----------------------------------------------------------------------
def test_gaudi2_snapshot() -> None:
    devices, _ = detect(load_snapshot(SNAPSHOT))
    assert [d.id for d in devices] == [str(m) for m in range(8)]
    assert {d.type_label for d in devices} == {"Intel-GAUDI2"}
    assert {d.source for d in devices} == {"command"}
    by_id = {d.id: d for d in devices}
    assert (by_id["3"].pci_bus_id, by_id["3"].numa_node) == ("0000:33:00.0", 0)
    assert (by_id["7"].pci_bus_id, by_id["7"].numa_node) == ("0000:9a:00.0", 1)


def test_gaudi2_snapshot_node() -> None:
    node = accelkit.detect_node(load_snapshot(SNAPSHOT))
    assert node.resources["HPU"] == 8.0
    assert node.resources["accelerator_type:Intel-GAUDI2"] == 1.0
    # HABANA_VISIBLE_DEVICES=all is recorded (a container): it restricts nothing.
    assert [d.id for d in node.devices if d.family == "gaudi"] == [str(m) for m in range(8)]


def test_a_node_without_module_ids_offers_no_hpu_and_says_why(tmp_path: pathlib.Path) -> None:
    fake.write_sysfs(tmp_path, fake.fake_cards(4), module_ids=False)
    node = accelkit.detect_node(host_with(tmp_path))
    assert "HPU" not in node.resources
    assert [d for d in node.devices if d.family == "gaudi"] == []
    assert any(
        d.family == "gaudi" and d.level == "warning" and "4 of 4 Gaudi card(s)" in d.message
        for d in node.diagnostics
    )
