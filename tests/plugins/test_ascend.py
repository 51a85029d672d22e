"""The Huawei Ascend plugin: its data sheet, each detection layer, fakes and snapshots."""

from __future__ import annotations

import pathlib
from collections.abc import Mapping, Sequence
from typing import Any

import accelkit
import pytest
from accelkit.diagnostics import Diagnostic, collecting
from accelkit.host import CommandSpec, load_snapshot
from accelkit.registry import contract_errors, variables_read
from accelkit_plugins.ascend import AscendManager, probe_acl, soc_label
from accelkit_plugins.ascend import testing as fake
from hypothesis import given, settings
from hypothesis import strategies as st

NODES = pathlib.Path(__file__).parents[2] / "examples" / "nodes"
MANAGER = AscendManager()
DUO = [
    fake.FakeNpu(1, chips=2, chip_name="Ascend 310P3"),
    fake.FakeNpu(2, chips=2, chip_name="Ascend 310P3"),
]


def detect(host: accelkit.Host) -> tuple[list[accelkit.Device], list[Diagnostic]]:
    with collecting(MANAGER.name) as notes:
        devices = MANAGER.detect(host)
    return devices, notes


def host_with(
    root: pathlib.Path | None = None,
    *,
    chip_map: CommandSpec | None = None,
    card_list: CommandSpec | None = None,
    acl: Any = None,
    env: Mapping[str, str] | None = None,
) -> accelkit.FakeHost:
    commands = {fake.CHIP_MAP_ARGV: chip_map, fake.CARD_LIST_ARGV: card_list}
    return accelkit.FakeHost(
        root=root,
        env=env,
        commands={argv: spec for argv, spec in commands.items() if spec is not None},
        modules={} if acl is None else {"acl": acl},
    )


def texts(notes: Sequence[Diagnostic]) -> str:
    return "\n".join(f"{n.level}: {n.message}" for n in notes)


# -- part 1: the data sheet --------------------------------------------------------------------
def test_declares_the_ascend_family() -> None:
    assert contract_errors(MANAGER) == []
    assert (MANAGER.name, MANAGER.resource_name) == ("ascend", "NPU")
    assert MANAGER.visible_devices_env_var == "ASCEND_RT_VISIBLE_DEVICES"
    assert set(variables_read(MANAGER)) == {
        "ASCEND_RT_VISIBLE_DEVICES",
        "ASCEND_VISIBLE_DEVICES",
    }
    assert (MANAGER.frameworks.device, MANAGER.frameworks.collective) == ("npu", "hccl")
    assert MANAGER.scheduling.placement is accelkit.LOWEST_FREE
    assert accelkit.get_manager("ascend").resource_name == "NPU"


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, None),
        ({"ASCEND_RT_VISIBLE_DEVICES": ""}, []),
        ({"ASCEND_RT_VISIBLE_DEVICES": "NoDevFiles"}, []),
        ({"ASCEND_RT_VISIBLE_DEVICES": "0,3,5"}, ["0", "3", "5"]),
        # CANN stops at the first token that is not a plain decimal id, spaces included
        ({"ASCEND_RT_VISIBLE_DEVICES": "0, 3,5"}, ["0"]),
        ({"ASCEND_RT_VISIBLE_DEVICES": " 0,3"}, []),
        ({"ASCEND_RT_VISIBLE_DEVICES": "1,x,2"}, ["1"]),
        ({"ASCEND_RT_VISIBLE_DEVICES": "1,,2"}, ["1"]),
        ({"ASCEND_RT_VISIBLE_DEVICES": "1,\u00b2"}, ["1"]),
        ({"ASCEND_VISIBLE_DEVICES": "4,5"}, None),
        ({"ASCEND_VISIBLE_DEVICES": "4,5", "ASCEND_RT_VISIBLE_DEVICES": "1"}, ["1"]),
    ],
)
def test_reads_logical_ids_never_the_container_layer(
    env: dict[str, str], expected: list[str] | None
) -> None:
    assert MANAGER.read_visible(env) == expected


def test_writes_logical_ids_without_whitespace() -> None:
    assert MANAGER.visibility_env(["0", "3"]) == {"ASCEND_RT_VISIBLE_DEVICES": "0,3"}
    assert MANAGER.visibility_env([" 2 "]) == {"ASCEND_RT_VISIBLE_DEVICES": "2"}
    assert MANAGER.visibility_env([]) == {"ASCEND_RT_VISIBLE_DEVICES": ""}


@pytest.mark.parametrize(
    ("quantity", "units"), [(0.5, 5000), (1 / 3, 3333), (1, 10_000), (3, 30_000)]
)
def test_fractions_below_one_and_whole_numbers(quantity: float, units: int) -> None:
    assert MANAGER.validate_quantity(quantity) == units


def test_a_fraction_above_one_is_refused() -> None:
    with pytest.raises(accelkit.InvalidRequest):
        MANAGER.validate_quantity(1.5)


@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("Ascend 910B3", "Ascend910B3"),
        ("Ascend910B3", "Ascend910B3"),
        ("Ascend 310P3", "Ascend310P3"),
        ("Ascend 910", "Ascend910"),
        (" Ascend  910B4 ", "Ascend910B4"),
        ("", None),
        (None, None),
    ],
)
def test_type_label_is_the_soc_name(name: str | None, label: str | None) -> None:
    assert soc_label(name) == label


# -- part 2: detection -------------------------------------------------------------------------
@pytest.mark.parametrize("count", [0, 1, 2, 4, 8])
def test_fake_host_has_exactly_count_npus(count: int, tmp_path: pathlib.Path) -> None:
    devices, _ = detect(fake.make_host(count, tmp_path))
    assert [d.id for d in devices] == [str(n) for n in range(count)]
    assert all(d.source == "command" and d.type_label == "Ascend910B3" for d in devices)


def test_acl_probe_gives_count_and_soc() -> None:
    devices, notes = detect(host_with(acl=fake.fake_acl(4, "Ascend910B4")))
    assert [d.id for d in devices] == ["0", "1", "2", "3"]
    assert {(d.type_label, d.model, d.source) for d in devices} == {
        ("Ascend910B4", "Ascend910B4", "library")
    }
    assert "4 device(s) from the library layer" in texts(notes)


def test_acl_counts_only_visible_chips_named_by_their_logical_ids() -> None:
    env = {"ASCEND_RT_VISIBLE_DEVICES": "4,7"}
    devices, _ = detect(host_with(acl=fake.fake_acl(2), env=env))
    assert [d.id for d in devices] == ["4", "7"]


def test_acl_count_disagreeing_with_the_variable_is_noted() -> None:
    env = {"ASCEND_RT_VISIBLE_DEVICES": "4,7"}
    devices, notes = detect(host_with(acl=fake.fake_acl(8), env=env))
    assert len(devices) == 8
    assert "pyACL sees 8 NPU(s)" in texts(notes)


def test_acl_without_a_soc_name_still_counts() -> None:
    devices, _ = detect(host_with(acl=fake.fake_acl(2, soc=None)))
    assert [(d.id, d.type_label) for d in devices] == [("0", None), ("1", None)]


def test_acl_error_code_falls_back_to_npu_smi() -> None:
    npus = [fake.FakeNpu(n) for n in range(2)]
    host = host_with(acl=fake.fake_acl(0, error=507033), chip_map=(0, fake.chip_map_output(npus)))
    devices, notes = detect(host)
    assert [(d.id, d.source) for d in devices] == [("0", "command"), ("1", "command")]
    assert "507033" in texts(notes)


@pytest.mark.parametrize("acl", [ImportError("libascendcl.so: cannot open"), RuntimeError("boom")])
def test_a_broken_acl_falls_back(acl: BaseException) -> None:
    npus = [fake.FakeNpu(0)]
    devices, _ = detect(host_with(acl=acl, chip_map=(0, fake.chip_map_output(npus))))
    assert [d.id for d in devices] == ["0"]


def test_probe_returns_plain_data() -> None:
    def importer(name: str) -> Any:
        assert name == "acl"
        return fake.fake_acl(3, "Ascend910B2")

    assert probe_acl(importer) == {"count": 3, "soc": "Ascend910B2"}


def test_chip_map_skips_mcus_and_orders_by_logic_id() -> None:
    devices, _ = detect(host_with(chip_map=(0, fake.chip_map_output(DUO))))
    assert [(d.id, d.type_label, d.model) for d in devices] == [
        (str(n), "Ascend310P3", "Ascend 310P3") for n in range(4)
    ]


def test_chip_map_reports_mixed_models_per_chip() -> None:
    npus = [fake.FakeNpu(0), fake.FakeNpu(1, chips=2, chip_name="Ascend 310P3", mcu=False)]
    devices, _ = detect(host_with(chip_map=(0, fake.chip_map_output(npus))))
    assert [d.type_label for d in devices] == ["Ascend910B3", "Ascend310P3", "Ascend310P3"]


def test_chip_map_in_a_container_keeps_logic_ids_not_npu_ids() -> None:
    # Cards 4 and 5 mounted into a container: their chips are logical devices 0 and 1.
    npus = [fake.FakeNpu(4), fake.FakeNpu(5)]
    devices, _ = detect(host_with(chip_map=(0, fake.chip_map_output(npus))))
    assert [d.id for d in devices] == ["0", "1"]


def test_chip_map_without_a_logic_id_column_falls_back(tmp_path: pathlib.Path) -> None:
    chip_map = (0, "NPU ID    Chip ID    Name\n0    0    Ascend 910B3\n")
    npus = [fake.FakeNpu(0), fake.FakeNpu(1)]
    host = host_with(tmp_path, chip_map=chip_map, card_list=(0, fake.card_list_output(npus)))
    devices, notes = detect(host)
    assert [(d.id, d.source) for d in devices] == [("0", "command"), ("1", "command")]
    assert "no 'Chip Logic ID' column" in texts(notes)


def test_card_list_numbers_every_chip_from_zero() -> None:
    host = host_with(
        chip_map=(2, "", "npu-smi: unknown option -m"), card_list=(0, fake.card_list_output(DUO))
    )
    devices, notes = detect(host)
    assert [d.id for d in devices] == ["0", "1", "2", "3"]
    assert all(d.type_label is None for d in devices)
    assert "exited with 2" in texts(notes)


def test_card_list_tolerates_product_names_and_serials() -> None:
    output = (
        "\tTotal Count                    : 1\n\n"
        "\tNPU ID                         : 0\n"
        "\tProduct Name                   : IT21PDDA01\n"
        "\tSerial Number                  : 0000000000000000\n"
        "\tChip Count                     : 1\n"
    )
    devices, _ = detect(host_with(card_list=(0, output)))
    assert [d.id for d in devices] == ["0"]


def test_card_list_without_chip_counts_falls_to_devfs(tmp_path: pathlib.Path) -> None:
    fake.write_devfs(tmp_path, [0, 1])
    output = "\tTotal Count : 2\n\tNPU ID : 0\n\tNPU ID : 1\n"
    devices, notes = detect(host_with(tmp_path, card_list=(0, output)))
    assert [(d.id, d.source) for d in devices] == [("0", "devfs"), ("1", "devfs")]
    assert "without a numeric Chip Count" in texts(notes)


def test_devfs_counts_chips_and_never_uses_physical_ids(tmp_path: pathlib.Path) -> None:
    # A container holding the host's chips 4 and 6: logical ids 0 and 1, not 4 and 6.
    fake.write_devfs(tmp_path, [4, 6])
    (tmp_path / "dev/davinci_extra").touch()
    devices, notes = detect(host_with(tmp_path))
    assert [(d.id, d.source, d.type_label) for d in devices] == [
        ("0", "devfs", None),
        ("1", "devfs", None),
    ]
    assert "2 /dev/davinci file(s) counted as logical ids" in texts(notes)


def test_support_files_alone_are_no_npus(tmp_path: pathlib.Path) -> None:
    fake.write_devfs(tmp_path, [])
    devices, notes = detect(host_with(tmp_path))
    assert devices == []
    assert "no detection layer answered" in texts(notes)


@pytest.mark.parametrize(
    "failure",
    [TimeoutError("npu-smi hung"), (255, "", "dcmi model initialized failed"), (0, "\x00\x01")],
)
def test_failing_npu_smi_falls_to_devfs(failure: CommandSpec, tmp_path: pathlib.Path) -> None:
    fake.write_devfs(tmp_path, range(8))
    devices, _ = detect(host_with(tmp_path, chip_map=failure, card_list=failure))
    assert [d.id for d in devices] == [str(n) for n in range(8)]
    assert {d.source for d in devices} == {"devfs"}


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300), st.text(max_size=300))
def test_any_npu_smi_output_gives_devices_or_nothing(chip_map: str, card_list: str) -> None:
    devices, _ = detect(host_with(chip_map=(0, chip_map), card_list=(0, card_list)))
    assert all(d.id.isdigit() for d in devices)
    assert len({d.id for d in devices}) == len(devices)


# -- part 3: snapshots -------------------------------------------------------------------------
def test_ascend_910b_snapshot() -> None:
    devices, _ = detect(load_snapshot(NODES / "ascend-910b-8"))
    assert [d.id for d in devices] == [str(n) for n in range(8)]
    assert {(d.type_label, d.source) for d in devices} == {("Ascend910B3", "command")}


def test_ascend_910b_snapshot_node() -> None:
    node = accelkit.detect_node(load_snapshot(NODES / "ascend-910b-8"))
    assert node.resources["NPU"] == 8.0
    assert node.resources["accelerator_type:Ascend910B3"] == 1.0


def test_mixed_node_snapshot_ascend_part() -> None:
    devices, _ = detect(load_snapshot(NODES / "mixed-nvidia-ascend"))
    assert [(d.id, d.type_label) for d in devices] == [(str(n), "Ascend310P3") for n in range(4)]


def test_mixed_node_has_both_families_apart() -> None:
    node = accelkit.detect_node(load_snapshot(NODES / "mixed-nvidia-ascend"))
    assert node.resources["NPU"] == 4.0
    assert node.resources["GPU"] == 2.0
    assert node.resources["accelerator_type:Ascend310P3"] == 1.0
    assert [d.resource_name for d in node.devices if d.family == "nvidia"] == ["GPU", "GPU"]
    assert [d.id for d in node.devices if d.family == "ascend"] == ["0", "1", "2", "3"]
    assert {d.family for d in node.devices} == {"nvidia", "ascend"}
