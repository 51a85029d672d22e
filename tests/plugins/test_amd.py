"""The AMD plugin: its data sheet, each detection layer, the fake host and the snapshot."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import pathlib
import shutil
from typing import Any, Callable, Optional

import accelkit
import pytest
from accelkit.detect import relative_ids
from accelkit.host import load_snapshot
from accelkit.registry import contract_errors, variables_read
from accelkit.testing.fakes import amd as fake
from accelkit.testing.fakes.amd import AMDSMI_STATUS_NOT_SUPPORTED
from accelkit.testing.fakes.amdsmi_c import emulated_amdsmi
from accelkit_plugins.amd import PRODUCTS, AmdManager
from accelkit_plugins.amd import testing as amd_hosts
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SNAPSHOT = pathlib.Path(__file__).parents[2] / "examples" / "nodes" / "amd-mi300x-8gpu"
MANAGER = AmdManager()
KFD = "sys/class/kfd"


def host_with(
    tmp_path: pathlib.Path,
    gpus: list[fake.FakeAmdGpu],
    *,
    amdsmi: Any = None,
    listed: Any = None,
    static: Any = None,
    sysfs: bool = True,
) -> accelkit.FakeHost:
    if sysfs:
        amd_hosts.write_sysfs(tmp_path, gpus)
    commands = {}
    if listed is not None:
        commands[amd_hosts.AMD_SMI_LIST_ARGV] = listed
    if static is not None:
        commands[amd_hosts.AMD_SMI_STATIC_ARGV] = static
    modules = {} if amdsmi is None else {"amdsmi": amdsmi}
    return accelkit.FakeHost(root=tmp_path, commands=commands, modules=modules)


# -- part 1: the data sheet --------------------------------------------------------------------
def test_declares_the_amd_family() -> None:
    assert contract_errors(MANAGER) == []
    assert (MANAGER.name, MANAGER.resource_name) == ("amd", "GPU")
    assert MANAGER.visible_devices_env_var == "ROCR_VISIBLE_DEVICES"
    assert set(variables_read(MANAGER)) == {
        "ROCR_VISIBLE_DEVICES",
        "HIP_VISIBLE_DEVICES",
        "CUDA_VISIBLE_DEVICES",
    }
    # PyTorch on ROCm names the device "cuda" and its RCCL-backed collective backend "nccl"
    assert (MANAGER.frameworks.device, MANAGER.frameworks.collective) == ("cuda", "nccl")
    assert MANAGER.validate_quantity(0.25) == 2500
    with pytest.raises(accelkit.InvalidRequest):
        MANAGER.validate_quantity(2.5)


def test_writes_rocr_ids_and_hip_positions_within_them() -> None:
    assert MANAGER.visibility_env(["1", "3"]) == {
        "ROCR_VISIBLE_DEVICES": "1,3",
        "HIP_VISIBLE_DEVICES": "0,1",
        "CUDA_VISIBLE_DEVICES": None,
    }
    assert MANAGER.visibility_env(["GPU-1000000000000001"])["ROCR_VISIBLE_DEVICES"] == (
        "GPU-1000000000000001"
    )


def test_a_grant_of_nothing_hides_every_gpu_through_rocr() -> None:
    assert MANAGER.visibility_env([]) == {
        "ROCR_VISIBLE_DEVICES": "",
        "HIP_VISIBLE_DEVICES": None,
        "CUDA_VISIBLE_DEVICES": None,
    }


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, None),
        ({"ROCR_VISIBLE_DEVICES": ""}, []),
        ({"ROCR_VISIBLE_DEVICES": "NoDevFiles"}, []),
        ({"ROCR_VISIBLE_DEVICES": " 2, 3 "}, ["2", "3"]),
        ({"ROCR_VISIBLE_DEVICES": "GPU-1000000000000001"}, ["GPU-1000000000000001"]),
        ({"HIP_VISIBLE_DEVICES": "1,0"}, ["1", "0"]),
        ({"CUDA_VISIBLE_DEVICES": "5"}, ["5"]),
        # HIP's indices are relative to ROCr's list
        ({"ROCR_VISIBLE_DEVICES": "4,5,6", "HIP_VISIBLE_DEVICES": "0,2"}, ["4", "6"]),
        ({"ROCR_VISIBLE_DEVICES": "4,5,6", "CUDA_VISIBLE_DEVICES": "1"}, ["5"]),
        # HIP_VISIBLE_DEVICES wins over CUDA_VISIBLE_DEVICES, even when it hides everything
        (
            {
                "ROCR_VISIBLE_DEVICES": "4,5",
                "HIP_VISIBLE_DEVICES": "1",
                "CUDA_VISIBLE_DEVICES": "0",
            },
            ["5"],
        ),
        # an empty HIP variable is unset to HIP, which then reads CUDA's
        ({"HIP_VISIBLE_DEVICES": "", "CUDA_VISIBLE_DEVICES": "0"}, ["0"]),
        (
            {"ROCR_VISIBLE_DEVICES": "4,5", "HIP_VISIBLE_DEVICES": "", "CUDA_VISIBLE_DEVICES": "1"},
            ["5"],
        ),
        # every list stops at its first invalid token, as ROCr and HIP parse them
        ({"ROCR_VISIBLE_DEVICES": "1,x,2"}, ["1"]),
        ({"ROCR_VISIBLE_DEVICES": "x,1"}, []),
        ({"ROCR_VISIBLE_DEVICES": "4,5,6", "HIP_VISIBLE_DEVICES": "2,-1,0"}, ["6"]),
        ({"CUDA_VISIBLE_DEVICES": "0,1.5,2"}, ["0"]),
        # physical ids in both (SLURM without AutoDetect) select past the end: nothing visible
        ({"ROCR_VISIBLE_DEVICES": "4,5", "HIP_VISIBLE_DEVICES": "4,5"}, []),
        ({"ROCR_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": "0"}, []),
        ({"ROCR_VISIBLE_DEVICES": "4,5", "HIP_VISIBLE_DEVICES": "NoDevFiles"}, []),
        (
            {"ROCR_VISIBLE_DEVICES": "GPU-aa,GPU-bb", "HIP_VISIBLE_DEVICES": "GPU-bb,GPU-cc"},
            ["GPU-BB"],
        ),
    ],
)
def test_reads_rocr_then_hip_relative_to_it(
    env: dict[str, str], expected: list[str] | None
) -> None:
    assert MANAGER.read_visible(env) == expected


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        # ROCr: trimmed, upper-cased, strtol base 0 over the whole token (amd_filter_device.cpp)
        ({"ROCR_VISIBLE_DEVICES": "0x1"}, ["1"]),
        ({"ROCR_VISIBLE_DEVICES": "010"}, ["8"]),
        ({"ROCR_VISIBLE_DEVICES": "+2,-0"}, ["2", "0"]),
        ({"ROCR_VISIBLE_DEVICES": "08"}, []),
        ({"ROCR_VISIBLE_DEVICES": "1x"}, []),
        ({"ROCR_VISIBLE_DEVICES": "4294967297"}, ["1"]),  # the long stored in an int32_t
        ({"ROCR_VISIBLE_DEVICES": "\t1\n"}, ["1"]),
        ({"ROCR_VISIBLE_DEVICES": "gpu-00ab"}, ["GPU-00AB"]),
        ({"ROCR_VISIBLE_DEVICES": "GPU-"}, []),  # under 5 characters
        ({"ROCR_VISIBLE_DEVICES": "GPU-00000000000000001"}, []),  # over 20
        ({"ROCR_VISIBLE_DEVICES": "1,0,1,2"}, ["1", "0"]),  # a repeat ends the list
        ({"ROCR_VISIBLE_DEVICES": "1,0x1,2"}, ["1"]),
        ({"ROCR_VISIBLE_DEVICES": "0,"}, ["0"]),  # getline adds no token after a trailing comma
        # HIP: untrimmed exact decimals, repeats skipped, "GPU-" by prefix (rocdevice.cpp)
        ({"HIP_VISIBLE_DEVICES": " 1"}, []),
        ({"HIP_VISIBLE_DEVICES": "01"}, []),
        ({"HIP_VISIBLE_DEVICES": "0x1"}, []),
        ({"HIP_VISIBLE_DEVICES": "+1"}, []),
        ({"HIP_VISIBLE_DEVICES": "1,1,0"}, ["1", "0"]),
        ({"ROCR_VISIBLE_DEVICES": "4,5", "HIP_VISIBLE_DEVICES": "1,1,0"}, ["5", "4"]),
        ({"ROCR_VISIBLE_DEVICES": "4,5", "HIP_VISIBLE_DEVICES": "0,2,1"}, ["4"]),
        ({"HIP_VISIBLE_DEVICES": "GPU-00ab,1"}, ["GPU-00ab", "1"]),
        ({"HIP_VISIBLE_DEVICES": "GPU-00AB"}, []),  # HIP compares with lower-case hex
        (
            {"ROCR_VISIBLE_DEVICES": "GPU-00AB,GPU-00CD", "HIP_VISIBLE_DEVICES": "GPU-00c"},
            ["GPU-00CD"],
        ),
        ({"ROCR_VISIBLE_DEVICES": "0,GPU-00CD", "HIP_VISIBLE_DEVICES": "GPU-00cd"}, []),
        # HIP="" is unset: CUDA's is read; CUDA="" too means no restriction for HIP
        ({"HIP_VISIBLE_DEVICES": "", "CUDA_VISIBLE_DEVICES": ""}, None),
        ({"CUDA_VISIBLE_DEVICES": ""}, None),
        ({"ROCR_VISIBLE_DEVICES": "3", "CUDA_VISIBLE_DEVICES": ""}, ["3"]),
    ],
)
def test_reads_each_variable_as_rocm_sources_do(
    env: dict[str, str], expected: list[str] | None
) -> None:
    assert MANAGER.read_visible(env) == expected


@pytest.mark.parametrize("value", ["0,,1", ",0", "0, ,1", ",", "0,,"])
def test_an_empty_rocr_token_is_a_value_rocr_refuses(value: str) -> None:
    with pytest.raises(ValueError, match="empty token"):
        MANAGER.read_visible({"ROCR_VISIBLE_DEVICES": value})


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("4,x,5", "'x', which ROCr cannot read (neither an index nor a GPU- UUID prefix)"),
        ("4,1x,5", "'1x', which ROCr cannot read (neither an index nor a GPU- UUID prefix)"),
        ("4,0x4,5", "'0x4', GPU 4 again"),
    ],
)
def test_a_rocr_token_where_rocr_stops_reading_is_a_warning(
    tmp_path: pathlib.Path, value: str, said: str
) -> None:
    """As a token that names no GPU ("9", "10,2") is: GPU 4 alone, and why (it was silent)."""
    recorded = tmp_path / "node"
    shutil.copytree(SNAPSHOT, recorded, symlinks=True)
    manifest = json.loads((recorded / "snapshot.json").read_text())
    manifest["env"]["ROCR_VISIBLE_DEVICES"] = value
    (recorded / "snapshot.json").write_text(json.dumps(manifest))
    node = accelkit.detect_node(load_snapshot(recorded))
    assert [d.id for d in node.devices] == ["4"]
    warnings = [d.message for d in node.diagnostics if d.level == "warning"]
    rest = value.split(",")[1:]
    assert warnings == [
        f"ROCR_VISIBLE_DEVICES names {said}; the runtime stops reading the list there, leaving "
        f"out {', '.join(map(repr, rest))} (name each device this node has once)"
    ]


def test_a_rocr_uuid_prefix_names_the_gpu_in_any_case() -> None:
    gpu = accelkit.Device("0", 0, uuid="GPU-00ab000000000001")
    assert MANAGER.matches("GPU-00AB", gpu) and MANAGER.matches("GPU-00ab", gpu)
    assert not MANAGER.matches("GPU-", gpu) and not MANAGER.matches("GPU-00AC", gpu)


VALUES = st.one_of(st.none(), st.text(alphabet="0123456789, GPU-abcNoDevFils", max_size=20))


@settings(max_examples=300, deadline=None)
@given(rocr=VALUES, hip=VALUES, cuda=VALUES)
def test_any_combination_of_the_three_variables_reads_without_raising(
    rocr: Optional[str], hip: Optional[str], cuda: Optional[str]
) -> None:
    names = ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
    env = {k: v for k, v in zip(names, (rocr, hip, cuda)) if v is not None}
    try:
        ids = MANAGER.read_visible(env)
    except ValueError:  # a value ROCr refuses (an empty token)
        return
    assert ids is None or all(token.isdecimal() or token.startswith("GPU-") for token in ids)
    if rocr is not None and ids is not None:  # HIP can only narrow ROCr's list
        assert set(ids) <= set(MANAGER.read_visible({"ROCR_VISIBLE_DEVICES": rocr}) or [])


@settings(max_examples=500, deadline=None)
@given(rocr=st.one_of(st.none(), st.text()), hip=st.one_of(st.none(), st.text()))
def test_any_value_reads_or_raises_only_value_error(
    rocr: Optional[str], hip: Optional[str]
) -> None:
    env = {"ROCR_VISIBLE_DEVICES": rocr, "HIP_VISIBLE_DEVICES": hip, "CUDA_VISIBLE_DEVICES": hip}
    with contextlib.suppress(ValueError):  # the only refusal a value may meet
        MANAGER.read_visible({k: v for k, v in env.items() if v is not None})


@given(
    st.lists(st.text(alphabet="0123456789GPU-ab", min_size=1, max_size=6), max_size=6),
    st.lists(st.text(alphabet="0123456789GPU-ab", min_size=1, max_size=4), max_size=6),
)
def test_relative_ids_select_only_from_the_base_list(base: list[str], tokens: list[str]) -> None:
    chosen = relative_ids(base, tokens)
    assert all(token in base for token in chosen)
    assert len(chosen) <= len(tokens)


@given(st.lists(st.integers(min_value=0, max_value=31).map(str), max_size=8, unique=True))
def test_written_ids_read_back_the_same(ids: list[str]) -> None:
    inherited = {"HIP_VISIBLE_DEVICES": "3", "CUDA_VISIBLE_DEVICES": "0,1"}
    env = {**inherited, **MANAGER.visibility_env(ids)}
    assert MANAGER.read_visible({k: v for k, v in env.items() if v is not None}) == ids


@pytest.mark.parametrize(
    ("device_id", "label"),
    [
        ("0x74a1", "AMD-Instinct-MI300X-OAM"),
        ("0x74A1", "AMD-Instinct-MI300X-OAM"),
        (0x740F, "AMD-Instinct-MI210"),
        ("0x738c", "AMD-Instinct-MI100"),
        ("29857", "AMD-Instinct-MI300X-OAM"),  # KFD writes the id in decimal
        ("0x66a1", "AMD-Instinct-MI50"),
        ("0x75a3", "AMD-Instinct-MI355X-OAM"),
    ],
)
def test_type_label_comes_from_the_pci_device_id(device_id: Any, label: str) -> None:
    from accelkit_plugins.amd import gpu

    device = gpu(accelkit.FakeHost(), 0, {"asic": {"device_id": device_id}}, None, None)
    assert device.type_label == label


def test_every_listed_product_has_an_instinct_label() -> None:
    assert all(label.startswith("AMD-Instinct-MI") for label in PRODUCTS.values())
    assert len(PRODUCTS) == 15  # 12 products and 3 virtual functions labelled as theirs


@pytest.mark.parametrize(
    ("facts", "label", "model"),
    [
        (
            {"device_id": "0x7f01", "market_name": "AMD Instinct MI400X"},
            "AMD-Instinct-MI400X",
            "AMD Instinct MI400X",
        ),
        (
            {"device_id": "0x7550", "market_name": "Radeon RX 9070 XT"},
            "AMD-Radeon-RX-9070-XT",
            "Radeon RX 9070 XT",
        ),
        ({"device_id": "0x7f01", "market_name": "N/A"}, "AMD-GPU-7f01", None),
        ({"device_id": "0x7f01"}, "AMD-GPU-7f01", None),
    ],
)
def test_an_unknown_id_keeps_the_market_name(
    facts: dict[str, str], label: str, model: Optional[str]
) -> None:
    from accelkit_plugins.amd import gpu

    device = gpu(accelkit.FakeHost(), 0, facts, None, None)
    assert (device.type_label, device.model) == (label, model)


# -- part 2: detection -------------------------------------------------------------------------
# Every fact of eight MI300X across amdsmi releases (6.0's shapes included) and handles in an
# order that is not KFD's: tests/plugins/test_real_wrappers.py. The amdsmi tests here run the
# real package (fetched into the pytest cache: tests/conftest.py) over an emulated libamd_smi.
def test_amdsmi_failing_half_way_is_shut_down_and_the_next_layer_answers(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any], amdsmi_dir: pathlib.Path
) -> None:
    gpus = fake.fake_amdgpus(2)
    failing = {"amdsmi_get_gpu_vram_info": AMDSMI_STATUS_NOT_SUPPORTED}
    amdsmi = emulated_amdsmi(gpus, errors=failing, package_dir=amdsmi_dir)
    devices, notes = run_detect(MANAGER, host_with(tmp_path, gpus, amdsmi=amdsmi))
    assert (amdsmi.calls["amdsmi_init"], amdsmi.calls["amdsmi_shut_down"]) == (1, 1)
    assert [(d.id, d.source) for d in devices] == [("0", "sysfs"), ("1", "sysfs")]
    assert "library layer failed: AmdSmiLibraryException" in notes
    assert "AMDSMI_STATUS_NOT_SUPPORTED" in notes


def test_amd_smi_layer(tmp_path: pathlib.Path, run_detect: Callable[..., Any]) -> None:
    gpus = fake.fake_amdgpus(8)
    host = host_with(
        tmp_path,
        gpus,
        listed=(0, amd_hosts.amd_smi_list_output(gpus)),
        static=(0, amd_hosts.amd_smi_static_output(gpus)),
    )
    devices, _ = run_detect(MANAGER, host)
    assert [d.id for d in devices] == [str(n) for n in range(8)]
    assert {d.source for d in devices} == {"command"}
    assert devices[7].uuid == gpus[7].rocr_uuid
    assert devices[7].model == "AMD Instinct MI300X"
    assert devices[7].memory_bytes == 196592 * fake.MIB
    assert devices[7].numa_node == 1


@pytest.mark.parametrize("layout", ["rocm-6.0", "rocm-6.1", "rocm-7"])
def test_amd_smi_static_layouts_of_several_releases(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any], layout: str
) -> None:
    gpus = fake.fake_amdgpus(2)
    records = json.loads(amd_hosts.amd_smi_static_output(gpus))
    if layout == "rocm-6.0":  # flat VRAM fields, memory as a number of MB
        for record in records:
            record["vram"] = {"vram_type": "HBM", "vram_size_mb": 196592}
    if layout == "rocm-7":  # wrapped in an object, memory as text
        for record in records:
            record["vram"]["size"] = "196592 MB"
        records = {"gpu_data": records}
    host = host_with(
        tmp_path,
        gpus,
        listed=(0, amd_hosts.amd_smi_list_output(gpus)),
        static=(0, json.dumps(records)),
        sysfs=False,
    )
    devices, _ = run_detect(MANAGER, host)
    assert [(d.type_label, d.memory_bytes, d.uuid) for d in devices] == [
        ("AMD-Instinct-MI300X-OAM", 196592 * fake.MIB, g.rocr_uuid) for g in gpus
    ]


def test_amd_smi_list_alone_still_counts_gpus(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    gpus = fake.fake_amdgpus(2)
    host = host_with(
        tmp_path, gpus, listed=(0, amd_hosts.amd_smi_list_output(gpus)), static=(1, ""), sysfs=False
    )
    devices, notes = run_detect(MANAGER, host)
    assert [(d.id, d.pci_bus_id, d.type_label) for d in devices] == [
        ("0", gpus[0].bus_id, None),
        ("1", gpus[1].bus_id, None),
    ]
    assert "amd-smi static --asic --vram --json` exited with 1" in notes


@pytest.mark.parametrize(
    "answer", [(0, "not json"), (2, ""), TimeoutError("hung"), (0, '{"error": 3}')]
)
def test_a_broken_amd_smi_gives_the_sysfs_layers(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any], answer: Any
) -> None:
    gpus = fake.fake_amdgpus(2)
    devices, notes = run_detect(MANAGER, host_with(tmp_path, gpus, listed=answer))
    assert [(d.id, d.source, d.uuid) for d in devices] == [
        ("0", "sysfs", gpus[0].rocr_uuid),
        ("1", "sysfs", gpus[1].rocr_uuid),
    ]
    if answer == (0, '{"error": 3}'):  # JSON naming no GPU list: said, as the guide asks
        assert "warning: amd-smi printed JSON without a list of devices; ignoring it" in notes


def test_kfd_layer_skips_cpu_nodes_and_reads_the_bus_id(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    gpus = fake.fake_amdgpus(4)
    devices, _ = run_detect(MANAGER, host_with(tmp_path, gpus))
    assert [(d.id, d.pci_bus_id, d.uuid) for d in devices] == [
        (str(n), g.bus_id, g.rocr_uuid) for n, g in enumerate(gpus)
    ]
    assert {d.type_label for d in devices} == {"AMD-Instinct-MI300X-OAM"}
    assert devices[0].memory_bytes == 196592 * fake.MIB


@pytest.mark.parametrize("layer", ["library", "command"])
def test_ids_follow_kfd_order_whatever_order_a_layer_lists(
    tmp_path: pathlib.Path,
    run_detect: Callable[..., Any],
    layer: str,
    request: pytest.FixtureRequest,
) -> None:
    """ROCR_VISIBLE_DEVICES=0 is KFD's first GPU node: a layer's own order must not leak."""
    gpus = fake.fake_amdgpus(4)
    if layer == "library":
        package = request.getfixturevalue("amdsmi_dir")
        reversed_handles = emulated_amdsmi(gpus, handle_order=[3, 2, 1, 0], package_dir=package)
        host = host_with(tmp_path, gpus, amdsmi=reversed_handles)
    else:
        listed = json.loads(amd_hosts.amd_smi_list_output(gpus))[::-1]
        host = host_with(
            tmp_path,
            gpus,
            listed=(0, json.dumps(listed)),
            static=(0, amd_hosts.amd_smi_static_output(gpus)),
        )
    devices, _ = run_detect(MANAGER, host)
    assert {d.source for d in devices} == {layer}
    assert [(d.id, d.index, d.pci_bus_id, d.uuid) for d in devices] == [
        (str(n), n, g.bus_id, g.rocr_uuid) for n, g in enumerate(gpus)
    ]


def test_without_kfd_a_layer_keeps_its_own_order(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any], amdsmi_dir: pathlib.Path
) -> None:
    gpus = fake.fake_amdgpus(3)
    amdsmi = emulated_amdsmi(gpus, handle_order=[2, 1, 0], package_dir=amdsmi_dir)
    host = host_with(tmp_path, gpus, amdsmi=amdsmi)
    shutil.rmtree(tmp_path / KFD)
    devices, _ = run_detect(MANAGER, host)
    assert [d.pci_bus_id for d in devices] == [g.bus_id for g in reversed(gpus)]
    assert [d.id for d in devices] == ["0", "1", "2"]


def test_kfd_partitions_are_devices_of_their_own(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    """In CPX mode one MI300X is several KFD nodes on one PCI function: each is a ROCr device,
    on the card's bus id (KFD gives partition n function n, which is no PCI function)."""
    gpu = fake.fake_amdgpus(1)[0]
    devices, _ = run_detect(MANAGER, host_with(tmp_path, fake.partitions_of(gpu, 4)))
    assert [d.id for d in devices] == ["0", "1", "2", "3"]
    assert {d.pci_bus_id for d in devices} == {gpu.bus_id}


def test_drm_layer_answers_without_kfd_and_counts_a_card_once(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    gpus = fake.fake_amdgpus(3)
    host = host_with(tmp_path, gpus)
    shutil.rmtree(tmp_path / KFD)
    devices, _ = run_detect(MANAGER, host)
    assert [(d.id, d.pci_bus_id, d.source) for d in devices] == [
        (str(n), g.bus_id, "sysfs") for n, g in enumerate(gpus)
    ]
    assert {d.type_label for d in devices} == {"AMD-Instinct-MI300X-OAM"}


def test_drm_ignores_other_vendors(tmp_path: pathlib.Path, run_detect: Callable[..., Any]) -> None:
    amd_hosts.write_sysfs(tmp_path, fake.fake_amdgpus(1))
    shutil.rmtree(tmp_path / KFD)
    other = tmp_path / "sys/bus/pci/devices/0000:03:00.0"
    other.mkdir(parents=True)
    (other / "vendor").write_text("0x1a03\n")
    (tmp_path / "sys/class/drm/card0").mkdir()
    (tmp_path / "sys/class/drm/card0/device").symlink_to("/sys/bus/pci/devices/0000:03:00.0")
    devices, _ = run_detect(MANAGER, accelkit.FakeHost(root=tmp_path))
    assert [d.pci_bus_id for d in devices] == [fake.BUS_IDS[0]]


def test_no_amd_stack_gives_no_devices(run_detect: Callable[..., Any]) -> None:
    devices, notes = run_detect(MANAGER, accelkit.FakeHost())
    assert devices == []
    assert "amd-smi is not installed" in notes


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(listed=st.text(max_size=200), static=st.text(max_size=200))
def test_any_amd_smi_output_never_raises(
    run_detect: Callable[..., Any], listed: str, static: str
) -> None:
    commands = {
        amd_hosts.AMD_SMI_LIST_ARGV: (0, listed),
        amd_hosts.AMD_SMI_STATIC_ARGV: (0, static),
    }
    devices, _ = run_detect(MANAGER, accelkit.FakeHost(commands=commands))
    assert isinstance(devices, list)


@settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=8),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(
                st.sampled_from(
                    [
                        "gpu",
                        "bdf",
                        "asic",
                        "device_id",
                        "vram",
                        "size",
                        "value",
                        "unit",
                        "market_name",
                        "asic_serial",
                    ]
                ),
                inner,
                max_size=4,
            )
        ),
        max_leaves=12,
    )
)
def test_any_json_shape_from_amd_smi_never_raises(
    run_detect: Callable[..., Any], data: Any
) -> None:
    text = json.dumps(data)
    commands = {amd_hosts.AMD_SMI_LIST_ARGV: (0, text), amd_hosts.AMD_SMI_STATIC_ARGV: (0, text)}
    devices, _ = run_detect(MANAGER, accelkit.FakeHost(commands=commands))
    assert isinstance(devices, list)


# -- part 3: fake hosts and the snapshot -------------------------------------------------------
@pytest.mark.parametrize("count", [0, 1, 2, 8])
def test_make_host_has_count_gpus(check_make_host: Callable[..., Any], count: int) -> None:
    check_make_host(MANAGER, amd_hosts.make_host, count)


def test_snapshot_of_an_mi300x_node(check_snapshot: Callable[..., Any]) -> None:
    devices = check_snapshot(MANAGER, SNAPSHOT, 8, "AMD-Instinct-MI300X-OAM")
    assert [d.uuid for d in devices] == [g.rocr_uuid for g in fake.fake_amdgpus(8)]


def test_snapshot_sysfs_alone_gives_the_same_gpus() -> None:
    by_command = MANAGER.detect(load_snapshot(SNAPSHOT))
    by_sysfs = MANAGER.detect(accelkit.FakeHost(root=SNAPSHOT / "root"))
    assert {d.source for d in by_sysfs} == {"sysfs"}
    assert [(d.id, d.uuid, d.pci_bus_id, d.type_label, d.numa_node) for d in by_sysfs] == [
        (d.id, d.uuid, d.pci_bus_id, d.type_label, d.numa_node) for d in by_command
    ]


def test_mixed_models_are_reported_per_gpu_offline_from_sysfs(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    gpus = fake.fake_amdgpus(3)
    gpus[1] = dataclasses.replace(gpus[1], device_id=0x740F, market_name="AMD Instinct MI210")
    devices, _ = run_detect(MANAGER, host_with(tmp_path, gpus))
    assert [(d.id, d.type_label, d.source) for d in devices] == [
        ("0", "AMD-Instinct-MI300X-OAM", "sysfs"),
        ("1", "AMD-Instinct-MI210", "sysfs"),
        ("2", "AMD-Instinct-MI300X-OAM", "sysfs"),
    ]


def test_amd_smi_list_alone_takes_the_model_from_sysfs(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    gpus = fake.fake_amdgpus(2)
    host = host_with(
        tmp_path, gpus, listed=(0, amd_hosts.amd_smi_list_output(gpus)), static=(1, "")
    )
    devices, _ = run_detect(MANAGER, host)
    assert [(d.type_label, d.memory_bytes, d.source) for d in devices] == [
        ("AMD-Instinct-MI300X-OAM", 196592 * fake.MIB, "command")
    ] * 2
