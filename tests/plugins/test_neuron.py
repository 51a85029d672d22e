"""The AWS Neuron plugin: data sheet, neuron-ls in both JSON flags, sysfs, logical cores."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import accelkit
import pytest
from accelkit import FakeHost, InvalidRequest
from accelkit.diagnostics import collecting
from accelkit.host import load_snapshot
from accelkit.registry import contract_errors
from accelkit_plugins.neuron import NeuronManager
from accelkit_plugins.neuron import testing as fake
from hypothesis import given
from hypothesis import strategies as st

SNAPSHOT = Path(__file__).parents[2] / "examples/nodes/neuron-trn1-32xlarge"
MANAGER = NeuronManager()
REJECTED = (2, "", "neuron-ls: error: unrecognized arguments: --output-format json\n")


def detect(host: FakeHost) -> tuple[list[accelkit.Device], list[str]]:
    with collecting("neuron") as notes:
        devices = MANAGER.detect(host)
    return devices, [n.message for n in notes]


def new_format(cores: list[int]) -> str:
    """``neuron-ls --output-format json``: the device list inside an object with instance facts."""
    devices = json.loads(fake.neuron_ls_json(cores))
    return json.dumps({"instance_type": "trn1.32xlarge", "neuron_devices": devices})


# -- data sheet ------------------------------------------------------------------------------


def test_data_sheet() -> None:
    assert (MANAGER.name, MANAGER.resource_name) == ("neuron", "neuron_cores")
    assert MANAGER.visible_devices_env_var == "NEURON_RT_VISIBLE_CORES"
    assert set(MANAGER.env_vars_read) == {
        "NEURON_RT_VISIBLE_CORES",
        "NEURON_RT_NUM_CORES",
        "NEURON_LOGICAL_NC_CONFIG",
    }
    assert (MANAGER.frameworks.device, MANAGER.frameworks.collective) == ("xla", "xla")
    assert MANAGER.scheduling.placement is accelkit.CONTIGUOUS
    assert contract_errors(MANAGER) == []
    assert accelkit.get_manager("neuron").name == "neuron"


@pytest.mark.parametrize(
    ("value", "ids"),
    [
        ("3", ["3"]),
        ("0-3", ["0", "1", "2", "3"]),
        (" 1 , 4-5 ", ["1", "4", "5"]),
        ("", []),
        ("NoDevFiles", []),
    ],
)
def test_read_visible_takes_lists_and_ranges(value: str, ids: list[str]) -> None:
    assert MANAGER.read_visible({"NEURON_RT_VISIBLE_CORES": value}) == ids


def test_a_core_count_is_never_read_as_core_ids() -> None:
    env = {"NEURON_RT_NUM_CORES": "4", "NEURON_LOGICAL_NC_CONFIG": "2"}
    assert MANAGER.read_visible(env) is None


def test_a_malformed_value_is_an_error_that_quotes_it() -> None:
    with pytest.raises(ValueError, match="'3-1'"):
        MANAGER.read_visible({"NEURON_RT_VISIBLE_CORES": "3-1"})


@pytest.mark.parametrize(
    ("ids", "value"),
    [(["3"], "3"), (["2", "3", "4", "5"], "2-5"), (["5", "4"], "4-5"), (["10", "9"], "9-10")],
)
def test_a_grant_is_written_as_one_core_or_one_range(ids: list[str], value: str) -> None:
    assert MANAGER.visibility_env(ids) == {
        "NEURON_RT_VISIBLE_CORES": value,
        "NEURON_RT_NUM_CORES": None,
    }


def test_cores_that_are_not_one_range_are_refused_with_the_forms_that_work() -> None:
    with pytest.raises(ValueError, match=r"0-1,4: NEURON_RT_VISIBLE_CORES takes one core"):
        MANAGER.visibility_env(["0", "1", "4"])


def test_hiding_every_core_writes_nothing_visible() -> None:
    assert MANAGER.visibility_env([])["NEURON_RT_VISIBLE_CORES"] == ""


@given(st.integers(0, 200), st.integers(1, 64))
def test_a_written_range_reads_back_as_the_same_cores(first: int, count: int) -> None:
    ids = [str(n) for n in range(first, first + count)]
    written = MANAGER.visibility_env(ids)["NEURON_RT_VISIBLE_CORES"]
    assert written is not None and " " not in written
    assert MANAGER.read_visible({"NEURON_RT_VISIBLE_CORES": written}) == ids


@pytest.mark.parametrize("quantity", [1, 2, 3, 32])
def test_whole_cores_of_any_count(quantity: int) -> None:
    assert MANAGER.validate_quantity(quantity) == quantity * 10_000


def test_a_fraction_of_a_core_is_refused() -> None:
    with pytest.raises(InvalidRequest, match="whole"):
        MANAGER.validate_quantity(0.5)


def test_placement_takes_the_lowest_contiguous_run() -> None:
    free = 0b1101  # core 1 taken: the lowest run of 2 is {2, 3}
    assert MANAGER.scheduling.placement.choose(free, 2) == 0b1100


# -- detection -------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [0, 1, 2, 3, 8, 32])
def test_fake_hosts_have_exactly_their_cores(count: int, tmp_path: Path) -> None:
    devices, _ = detect(fake.make_host(count, tmp_path))
    assert [d.id for d in devices] == [str(n) for n in range(count)]
    assert {d.type_label for d in devices} <= {"aws-neuron-core"}
    assert {d.source for d in devices} <= {"command"}


def test_cores_carry_their_device_facts(tmp_path: Path) -> None:
    devices, _ = detect(fake.make_host(32, tmp_path))
    core = devices[17]
    assert (core.parent, core.model) == ("neuron8", "Trainium1")
    assert core.pci_bus_id == "0000:" + fake.bus_id(8)
    assert (core.numa_node, devices[0].numa_node) == (1, 0)
    assert core.memory_bytes == fake.TRAINIUM1_MEMORY // 2


def test_the_newer_flag_is_asked_first_and_its_object_is_read(tmp_path: Path) -> None:
    fake.write_sysfs(tmp_path, [2, 2])
    host = FakeHost(root=tmp_path, commands={fake.NEW_FLAG: (0, new_format([2, 2]))})
    devices, _ = detect(host)
    assert [d.id for d in devices] == ["0", "1", "2", "3"]
    assert host.runs == [fake.NEW_FLAG]


def test_an_older_neuron_ls_is_asked_with_the_older_flag(tmp_path: Path) -> None:
    host = FakeHost(
        commands={fake.NEW_FLAG: REJECTED, fake.OLD_FLAG: (0, fake.neuron_ls_json([2, 2, 2]))}
    )
    devices, notes = detect(host)
    assert len(devices) == 6
    assert host.runs == [fake.NEW_FLAG, fake.OLD_FLAG]
    assert any("exited with 2" in n for n in notes)


@pytest.mark.parametrize(
    "answer",
    [(0, "{not json"), (0, '{"instance_type": "trn1.32xlarge"}'), (1, ""), TimeoutError()],
    ids=["bad-json", "no-device-list", "failing", "hanging"],
)
def test_a_broken_neuron_ls_gives_the_sysfs_layer(answer: object, tmp_path: Path) -> None:
    fake.write_sysfs(tmp_path, [2, 2])
    host = FakeHost(root=tmp_path, commands={"neuron-ls": answer})  # type: ignore[dict-item]
    devices, notes = detect(host)
    assert [(d.id, d.source) for d in devices] == [(str(n), "sysfs") for n in range(4)]
    assert len(notes) >= 2  # why each neuron-ls flag gave nothing, then the sysfs answer


def test_bad_json_is_a_diagnostic(tmp_path: Path) -> None:
    _, notes = detect(FakeHost(commands={"neuron-ls": (0, "{not json")}))
    assert any("is not valid JSON" in n for n in notes)


def test_a_device_without_nc_count_takes_the_drivers_count(tmp_path: Path) -> None:
    fake.write_sysfs(tmp_path, [2, 2])
    entries = [{"neuron_device": 0, "bdf": "10:1c.0"}, {"neuron_device": 1, "nc_count": "2"}]
    host = FakeHost(root=tmp_path, commands={"neuron-ls": (0, json.dumps(entries))})
    devices, _ = detect(host)
    assert [d.parent for d in devices] == ["neuron0", "neuron0", "neuron1", "neuron1"]


def test_sysfs_counts_core_directories_when_core_count_is_missing(tmp_path: Path) -> None:
    fake.write_sysfs(tmp_path, [2, 2])
    (tmp_path / fake.SYSFS / "neuron1/core_count").unlink()
    devices, _ = detect(FakeHost(root=tmp_path))
    assert [d.parent for d in devices] == ["neuron0", "neuron0", "neuron1", "neuron1"]


def test_garbage_core_count_is_noted(tmp_path: Path) -> None:
    fake.write_sysfs(tmp_path, [2])
    (tmp_path / fake.SYSFS / "neuron0/core_count").write_bytes(b"\x00\x01")
    devices, _ = detect(FakeHost(root=tmp_path))
    assert len(devices) == 2  # a binary file is unreadable: the core directories answer


# -- logical cores ---------------------------------------------------------------------------


def _trn2(root: Path, env: dict[str, str]) -> FakeHost:
    fake.write_sysfs(root, [8, 8], device_name="Trainium2")
    return FakeHost(root=root, env=env)


def test_trainium2_groups_two_physical_cores_by_default(tmp_path: Path) -> None:
    devices, _ = detect(_trn2(tmp_path, {}))
    assert [d.id for d in devices] == [str(n) for n in range(8)]
    assert [d.parent for d in devices[3:5]] == ["neuron0", "neuron1"]


def test_the_lnc_variable_sets_the_grouping(tmp_path: Path) -> None:
    host = _trn2(tmp_path, {"NEURON_LOGICAL_NC_CONFIG": "1"})
    devices, _ = detect(host)
    assert len(devices) == 16
    assert MANAGER.labels(devices, host) == {"devices": "2", "lnc": "1", "model": "Trainium2"}


@pytest.mark.parametrize("value", ["two", "4", "0"])
def test_an_lnc_other_than_1_or_2_is_noted_and_the_default_used(tmp_path: Path, value: str) -> None:
    # AWS: "LNC can only be set to 1 or 2" (logical-neuroncore-config); 4 grouped by four
    devices, notes = detect(_trn2(tmp_path / value, {"NEURON_LOGICAL_NC_CONFIG": value}))
    assert len(devices) == 8
    assert any(f"{value!r} is not 1 or 2, the runtime's values; using 2" in n for n in notes)


def test_the_lnc_variable_leaves_trainium1_cores_single(tmp_path: Path) -> None:
    # "LNC applies only to Trn2 and Trn3": a Trn1 image that sets it (a shared environment) was
    # offered half its cores, ids 16-31 never granted, when detection read sysfs.
    fake.write_sysfs(tmp_path, [2, 2])  # two Trainium1 devices of two cores, no neuron-ls
    host = FakeHost(root=tmp_path, env={"NEURON_LOGICAL_NC_CONFIG": "2"})
    devices, notes = detect(host)
    assert len(devices) == 4 and MANAGER.labels(devices, host)["lnc"] == "1"
    assert any(
        "applies only to Trainium2 and later; Trainium1 cores stay single" in n for n in notes
    )


def test_trainium1_is_never_grouped_by_default(tmp_path: Path) -> None:
    host = fake.make_host(4, tmp_path)
    devices, _ = detect(host)
    assert MANAGER.labels(devices, host) == {"devices": "2", "lnc": "1", "model": "Trainium1"}
    assert MANAGER.labels([], host) == {}


@given(st.text(max_size=200))
def test_any_neuron_ls_output_never_raises(text: str) -> None:
    devices, _ = detect(FakeHost(commands={"neuron-ls": (0, text)}))
    assert all(d.type_label == "aws-neuron-core" for d in devices)


@given(
    st.lists(
        st.dictionaries(
            st.sampled_from(["neuron_device", "nc_count", "bdf", "memory_size"]),
            st.one_of(st.none(), st.integers(-5, 9), st.text(max_size=8), st.booleans()),
        ),
        max_size=4,
    )
)
def test_any_device_entries_give_whole_cores_and_never_raise(entries: list[object]) -> None:
    devices, _ = detect(FakeHost(commands={"neuron-ls": (0, json.dumps(entries))}))
    assert [d.id for d in devices] == [str(n) for n in range(len(devices))]
    assert all(d.memory_bytes is None or d.memory_bytes > 0 for d in devices)


# -- the whole node --------------------------------------------------------------------------


def test_snapshot_trn1_32xlarge() -> None:
    host = load_snapshot(SNAPSHOT)
    devices, _ = detect(host)
    assert [d.id for d in devices] == [str(n) for n in range(32)]
    assert [d.parent for d in devices[:3]] == ["neuron0", "neuron0", "neuron1"]
    assert {d.model for d in devices} == {"Trainium1"}
    node = accelkit.detect_node(host)
    assert node.resources["neuron_cores"] == 32.0
    assert node.resources["accelerator_type:aws-neuron-core"] == 1.0
    assert node.labels["accelkit/neuron.model"] == "Trainium1"


def test_a_visible_cores_range_on_the_node_restricts_it(tmp_path: Path) -> None:
    copy = tmp_path / "node"
    shutil.copytree(SNAPSHOT, copy, symlinks=True)
    manifest = json.loads((copy / "snapshot.json").read_text())
    manifest["env"] = {"NEURON_RT_VISIBLE_CORES": "4-7"}
    (copy / "snapshot.json").write_text(json.dumps(manifest))
    node = accelkit.detect_node(load_snapshot(copy))
    assert [d.id for d in node.devices if d.family == "neuron"] == ["4", "5", "6", "7"]
    assert node.resources["neuron_cores"] == 4.0


# -- Trainium2: logical cores (LNC) ------------------------------------------------------------
@pytest.mark.parametrize(("lnc", "cores"), [(2, 64), (1, 128)])
def test_trn2_neuron_ls_counts_logical_cores_already(tmp_path: Path, lnc: int, cores: int) -> None:
    """A trn2.48xlarge at LNC=2 has 16 devices x 4 logical cores = 64: never divided again."""
    devices, _ = detect(fake.trn2_host(tmp_path, lnc=lnc))
    assert len(devices) == cores
    assert {d.source for d in devices} == {"command"}
    assert [d.id for d in devices] == [str(n) for n in range(cores)]
    per_device = cores // 16
    assert [d.parent for d in devices[:per_device]] == ["neuron0"] * per_device
    assert devices[per_device].parent == "neuron1"
    assert {d.memory_bytes for d in devices} == {96 * 1024**3 // per_device}


@pytest.mark.parametrize(("lnc", "cores"), [(2, 64), (1, 128)])
def test_trn2_sysfs_groups_physical_cores_into_the_same_logical_count(
    tmp_path: Path, lnc: int, cores: int
) -> None:
    host = fake.trn2_host(tmp_path, lnc=lnc)
    devices, _ = detect(FakeHost(root=tmp_path, env=dict(host.env)))
    assert len(devices) == cores
    assert {d.source for d in devices} == {"sysfs"}
