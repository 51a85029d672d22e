"""The NVIDIA plugin: its data sheet, each detection layer, MIG, the fake host and the snapshot."""

from __future__ import annotations

import dataclasses
import json
import pathlib
import shutil
import threading
from typing import Any, Callable

import accelkit
import pynvml
import pytest
from accelkit.host import load_snapshot
from accelkit.registry import contract_errors, variables_read
from accelkit.testing.fakes import nvidia as fake
from accelkit.testing.fakes.nvml_c import emulated_pynvml
from accelkit_plugins.nvidia import NvidiaManager
from accelkit_plugins.nvidia import testing as nvidia_hosts
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SNAPSHOT = pathlib.Path(__file__).parents[2] / "examples" / "nodes" / "nvidia-h100-8gpu"
MANAGER = NvidiaManager()
A100_MIGS = (
    fake.FakeMig(
        "MIG-11111111-2222-3333-4444-000000000001",
        "NVIDIA A100-SXM4-40GB MIG 1g.5gb",
        4864 * fake.MIB,
    ),
    fake.FakeMig(
        "MIG-11111111-2222-3333-4444-000000000002",
        "NVIDIA A100-SXM4-40GB MIG 3g.20gb",
        19968 * fake.MIB,
    ),
)


def host_with(
    tmp_path: pathlib.Path,
    gpus: list[fake.FakeGpu],
    *,
    nvml: Any = None,
    smi: Any = None,
    proc: bool = False,
    env: dict[str, str] | None = None,
) -> accelkit.FakeHost:
    """A host with the given layers: NVML module, nvidia-smi answer, /proc files (and sysfs)."""
    nvidia_hosts.write_sysfs(tmp_path, gpus)
    if proc:
        nvidia_hosts.write_proc(tmp_path, gpus)
    commands = {} if smi is None else {nvidia_hosts.NVIDIA_SMI_ARGV: smi}
    modules = {} if nvml is None else {"pynvml": nvml}
    return accelkit.FakeHost(root=tmp_path, env=env, commands=commands, modules=modules)


# -- part 1: the data sheet --------------------------------------------------------------------
def test_declares_the_nvidia_family() -> None:
    assert contract_errors(MANAGER) == []
    assert (MANAGER.name, MANAGER.resource_name) == ("nvidia", "GPU")
    assert MANAGER.visible_devices_env_var == "CUDA_VISIBLE_DEVICES"
    assert set(variables_read(MANAGER)) == {
        "CUDA_VISIBLE_DEVICES",
        "CUDA_DEVICE_ORDER",
        "NVIDIA_VISIBLE_DEVICES",
    }
    assert (MANAGER.frameworks.device, MANAGER.frameworks.collective) == ("cuda", "nccl")
    assert MANAGER.scheduling.placement is accelkit.LOWEST_FREE
    assert accelkit.get_manager("nvidia").name == "nvidia"


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, None),
        ({"CUDA_VISIBLE_DEVICES": ""}, []),
        ({"CUDA_VISIBLE_DEVICES": "NoDevFiles"}, []),
        ({"CUDA_VISIBLE_DEVICES": "  NoDevFiles "}, []),
        ({"CUDA_VISIBLE_DEVICES": " 0, 1 ,2 "}, ["0", "1", "2"]),
        ({"CUDA_VISIBLE_DEVICES": "3,1"}, ["3", "1"]),
        ({"CUDA_VISIBLE_DEVICES": "GPU-8932f937,GPU-0a1b2c3d"}, ["GPU-8932f937", "GPU-0a1b2c3d"]),
        ({"CUDA_VISIBLE_DEVICES": "MIG-8932f937,MIG-0a1b2c3d"}, ["MIG-8932f937", "MIG-0a1b2c3d"]),
        # a list is of UUIDs (either word) or of ordinals, as its first token; it ends at the other
        (
            {"CUDA_VISIBLE_DEVICES": "GPU-8932f937,MIG-0a1b2c3d-1111"},
            ["GPU-8932f937", "MIG-0a1b2c3d-1111"],
        ),
        ({"CUDA_VISIBLE_DEVICES": "GPU-8932f937,1"}, ["GPU-8932f937"]),
        ({"CUDA_VISIBLE_DEVICES": "1,GPU-8932f937"}, ["1"]),
        # CUDA stops at the first token it cannot read: "-1" hides every GPU
        ({"CUDA_VISIBLE_DEVICES": "-1"}, []),
        ({"CUDA_VISIBLE_DEVICES": "0,1,bogus,2"}, ["0", "1"]),
        # the container layer holds host ids and is never read as CUDA ids
        ({"NVIDIA_VISIBLE_DEVICES": "0,1"}, None),
        ({"NVIDIA_VISIBLE_DEVICES": "all"}, None),
        ({"NVIDIA_VISIBLE_DEVICES": "none"}, None),
        ({"NVIDIA_VISIBLE_DEVICES": "void"}, None),
        ({"NVIDIA_VISIBLE_DEVICES": "4,5", "CUDA_VISIBLE_DEVICES": "1"}, ["1"]),
        ({"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, None),
    ],
)
def test_reads_cuda_visible_devices(env: dict[str, str], expected: list[str] | None) -> None:
    assert MANAGER.read_visible(env) == expected


def test_writes_ids_and_the_pci_bus_order() -> None:
    assert MANAGER.visibility_env(["0", "3"]) == {
        "CUDA_VISIBLE_DEVICES": "0,3",
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
    }
    assert MANAGER.visibility_env([" 2 "])["CUDA_VISIBLE_DEVICES"] == "2"
    mig = "MIG-11111111-2222-3333-4444-000000000001"
    assert MANAGER.visibility_env([mig])["CUDA_VISIBLE_DEVICES"] == mig
    assert MANAGER.visibility_env([])["CUDA_VISIBLE_DEVICES"] == ""
    assert MANAGER.read_visible(MANAGER.visibility_env([])) == []  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=" ,0123456789GPUMI-abcdefNoDevFils\t", max_size=40))
def test_reading_any_value_never_raises_and_gives_clean_tokens(value: str) -> None:
    """Any value reads as ids, or as CUDA's own refusal: an ordinal given twice (``ValueError``)."""
    try:
        ids = MANAGER.read_visible({"CUDA_VISIBLE_DEVICES": value})
    except ValueError as exc:
        assert "named twice" in str(exc)
        return
    assert ids is not None
    assert all(token and token.strip() == token and "," not in token for token in ids)


@given(st.lists(st.integers(min_value=0, max_value=63).map(str), unique=True, max_size=8))
def test_written_ids_read_back_the_same(ids: list[str]) -> None:
    env = {k: v for k, v in MANAGER.visibility_env(ids).items() if v is not None}
    assert MANAGER.read_visible(env) == ids
    assert not any(ch.isspace() for value in env.values() for ch in value)


def test_an_index_names_a_whole_gpu_and_a_uuid_may_be_a_prefix() -> None:
    gpu = accelkit.Device("2", index=2, uuid="GPU-8932f937-d72c-4106-c12f-20bd9faed9f6")
    mig = accelkit.Device(A100_MIGS[0].uuid, index=2, uuid=A100_MIGS[0].uuid, parent="0")
    assert MANAGER.matches("2", gpu)
    assert MANAGER.matches("GPU-8932f937", gpu)
    assert MANAGER.matches(gpu.uuid or "", gpu)
    assert not MANAGER.matches("GPU-", gpu)
    assert not MANAGER.matches("GPU-0000", gpu)
    assert not MANAGER.matches("2", mig)  # a MIG instance is never named by an index
    assert MANAGER.matches(A100_MIGS[0].uuid, mig)
    assert MANAGER.matches("MIG-11111111", mig)


def test_gpus_may_be_shared_and_mig_instances_are_whole_one_per_grant() -> None:
    assert MANAGER.validate_quantity(0.5) == 5000
    assert MANAGER.validate_quantity(2) == 20000
    with pytest.raises(accelkit.InvalidRequest):
        MANAGER.validate_quantity(1.5)
    assert MANAGER.scheduling.partitions_per_grant == 1


@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("NVIDIA H100 80GB HBM3", "H100"),
        ("Tesla V100-SXM2-16GB", "V100"),
        ("NVIDIA A100-SXM4-40GB", "A100"),
        ("NVIDIA A100 80GB PCIe", "A100"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX-PRO-6000"),
        ("NVIDIA H200", "H200"),
        ("NVIDIA H20", "H20"),
        ("NVIDIA H100 NVL", "H100"),
        ("NVIDIA GH200 480GB", "GH200"),
        ("NVIDIA B200", "B200"),
        ("NVIDIA GB200", "GB200"),
        ("NVIDIA B300 SXM6 AC", "B300"),
        ("NVIDIA GB300", "GB300"),
        ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "RTX-PRO-6000"),
        ("NVIDIA RTX A6000", "RTX-A6000"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA L40", "L40"),
        ("NVIDIA A10G", "A10G"),
        ("NVIDIA A10", "A10"),
        ("Tesla T4", "T4"),
        ("Tesla P100-PCIE-16GB", "P100"),
        ("NVIDIA GeForce RTX 4090", "GeForce-RTX-4090"),
        ("Quadro RTX 8000", "Quadro-RTX-8000"),
    ],
)
def test_type_labels(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any], name: str, label: str
) -> None:
    gpu = dataclasses.replace(fake.fake_gpus(1)[0], name=name)
    devices, _ = run_detect(
        MANAGER, host_with(tmp_path, [gpu], smi=(0, nvidia_hosts.nvidia_smi_output([gpu])))
    )
    assert [(d.model, d.type_label) for d in devices] == [(name, label)]


# -- part 2: detection -------------------------------------------------------------------------
# Every fact of eight H100s, across nvidia-ml-py releases (str and bytes), the no-library and
# no-driver cases and memory "not supported": tests/plugins/test_real_wrappers.py. The NVML tests
# here run the installed real wrapper over an emulated libnvidia-ml.
def test_an_nvml_that_cannot_start_gives_the_next_layer(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    gpus = fake.fake_gpus(2)
    nvml = emulated_pynvml(gpus, init_error=pynvml.NVML_ERROR_UNKNOWN)
    host = host_with(tmp_path, gpus, nvml=nvml, smi=(0, nvidia_hosts.nvidia_smi_output(gpus)))
    devices, notes = run_detect(MANAGER, host)
    assert [d.source for d in devices] == ["command", "command"]
    assert "warning: library layer failed: NVMLError_Unknown: Unknown Error" in notes
    assert nvml.calls["nvmlShutdown"] == 0


def test_nvml_failing_half_way_is_still_shut_down(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    gpus = fake.fake_gpus(2)
    nvml = emulated_pynvml(gpus, errors={"nvmlDeviceGetName": pynvml.NVML_ERROR_UNKNOWN})
    devices, notes = run_detect(MANAGER, host_with(tmp_path, gpus, nvml=nvml, proc=True))
    assert (nvml.calls["nvmlInitWithFlags"], nvml.calls["nvmlShutdown"]) == (1, 1)
    assert [d.source for d in devices] == ["sysfs", "sysfs"]
    assert "warning: library layer failed: NVMLError_Unknown" in notes


def test_a_gpu_nvml_may_not_open_is_left_out_and_the_others_take_cudas_numbers(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    # nvml.h: nvmlDeviceGetCount_v2 counts a GPU whose nvmlDeviceGetHandleByIndex_v2 answers
    # NO_PERMISSION (its device file denied by a cgroup, say). CUDA counts only the GPUs whose
    # files it may open, so NVML's GPU 3 is CUDA's GPU 2.
    gpus = fake.fake_gpus(4)
    gpus[2] = dataclasses.replace(gpus[2], accessible=False)
    nvml = emulated_pynvml(gpus)
    host = host_with(tmp_path, gpus, nvml=nvml, smi=(0, nvidia_hosts.nvidia_smi_output(gpus)))
    devices, notes = run_detect(MANAGER, host)
    assert [(d.id, d.index, d.uuid, d.minor, d.source) for d in devices] == [
        (str(cuda), cuda, gpus[n].uuid, gpus[n].minor, "library")
        for cuda, n in enumerate((0, 1, 3))
    ]
    assert (
        "warning: NVML's GPU 2 is left out: NVML may not open it (NVMLError_NoPermission: "
        "Insufficient Permissions)" in notes
    )
    assert "the GPUs after it take CUDA's numbers" in notes
    # A job given NVML's GPU 3 in such a cgroup is told CUDA's number for it (SLURM's GRES guide)
    env = {"CUDA_VISIBLE_DEVICES": "2"}
    job = accelkit.FakeHost(root=tmp_path, env=env, modules={"pynvml": emulated_pynvml(gpus)})
    assert [(d.id, d.uuid) for d in accelkit.detect_node(job).devices] == [("2", gpus[3].uuid)]
    assert "library layer failed" not in notes
    assert nvml.calls["nvmlShutdown"] == 1


def test_a_gpu_fallen_off_the_bus_is_left_out_and_the_others_keep_their_numbers(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    # nvml.h: nvmlDeviceGetHandleByIndex_v2 answers GPU_IS_LOST for a GPU "fallen off the bus or
    # otherwise inaccessible" (Xid 79). It failed the whole NVML layer, and the driver's files
    # under /proc, which still list it, offered it to grants. The driver keeps it, and CUDA
    # still counts it: the GPUs after it keep NVML's numbers.
    gpus = fake.fake_gpus(4)
    gpus[1] = dataclasses.replace(gpus[1], lost=True)
    for nvml in (emulated_pynvml(gpus), fake.fake_pynvml(gpus)):
        host = host_with(tmp_path, gpus, nvml=nvml, proc=True)
        devices, notes = run_detect(MANAGER, host)
        assert [(d.id, d.uuid, d.source) for d in devices] == [
            (str(n), gpus[n].uuid, "library") for n in (0, 2, 3)
        ]
        assert (
            "warning: NVML's GPU 1 is left out: it has fallen off the bus or is otherwise "
            "inaccessible (NVMLError_GpuIsLost: GPU is lost); the driver recovers it only at a "
            "reboot (look for Xid 79 in the kernel log), and the GPUs after it keep their "
            "numbers" in notes
        )
        assert "library layer failed" not in notes


def test_a_gpu_nvml_cannot_open_is_left_out_unless_none_opens(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    # nvidia-smi's "Unable to determine the device handle for GPU ...: Unknown Error", the usual
    # face of a broken GPU: NVML_ERROR_UNKNOWN failed the whole NVML layer, and the /proc files
    # then offered that GPU to grants.
    gpus = fake.fake_gpus(3)
    gpus[0] = dataclasses.replace(gpus[0], broken=True)
    for nvml in (emulated_pynvml(gpus), fake.fake_pynvml(gpus)):
        devices, notes = run_detect(MANAGER, host_with(tmp_path, gpus, nvml=nvml, proc=True))
        assert [(d.id, d.uuid, d.source) for d in devices] == [
            (str(n), gpus[n].uuid, "library") for n in (1, 2)
        ]
        assert "warning: NVML's GPU 0 is left out: NVML cannot open it (NVMLError_Unknown" in notes
    # every GPU so: NVML itself is of no use, and the next layer answers
    broken = [dataclasses.replace(gpu, broken=True) for gpu in gpus]
    nvml = emulated_pynvml(broken)
    host = host_with(tmp_path, broken, nvml=nvml, smi=(0, nvidia_hosts.nvidia_smi_output(broken)))
    devices, notes = run_detect(MANAGER, host)
    assert [d.source for d in devices] == ["command"] * 3
    assert "NVML could open none of the 3 GPUs it counts" in notes
    assert nvml.calls["nvmlShutdown"] == 1


def test_gpus_lost_while_read_are_left_out_without_failing_the_layer(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    # Any NVML query may answer GPU_IS_LOST once a GPU falls off the bus between two calls.
    gpus = fake.fake_gpus(2)
    nvml = emulated_pynvml(gpus, errors={"nvmlDeviceGetUUID": pynvml.NVML_ERROR_GPU_IS_LOST})
    devices, notes = run_detect(MANAGER, host_with(tmp_path, gpus, nvml=nvml, proc=True))
    assert devices == []  # NVML answered: no GPU this node can use (the /proc files list both)
    for index in (0, 1):
        assert f"warning: GPU {index} is left out: it has fallen off the bus" in notes
    assert "library layer failed" not in notes
    assert nvml.calls["nvmlShutdown"] == 1


def mig_node() -> list[fake.FakeGpu]:
    """GPU 0: MIG on with two instances; GPU 1: no MIG; GPU 2: MIG-capable, MIG off."""
    gpus = fake.fake_gpus(3, name="NVIDIA A100-SXM4-40GB")
    return [
        dataclasses.replace(gpus[0], migs=A100_MIGS, mig_mode=1),
        dataclasses.replace(gpus[1], migs=None),
        dataclasses.replace(gpus[2], migs=(), mig_mode=0),
    ]


def test_mig_instances_replace_their_gpu(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    gpus = mig_node()
    devices, _ = run_detect(MANAGER, host_with(tmp_path, gpus, nvml=emulated_pynvml(gpus)))
    assert [d.id for d in devices] == [A100_MIGS[0].uuid, A100_MIGS[1].uuid, "1", "2"]
    first, second = devices[:2]
    assert (first.parent, first.type_label, first.uuid) == ("0", "A100-1g.5gb", A100_MIGS[0].uuid)
    assert (second.parent, second.type_label) == ("0", "A100-3g.20gb")
    assert second.memory_bytes == 19968 * fake.MIB
    assert first.pci_bus_id == fake.BUS_IDS[0] and first.index is None
    assert [d.parent for d in devices[2:]] == [None, None]
    assert "0" not in {d.id for d in devices}  # never handed out by its parent index


def test_mig_instances_are_devices_on_the_node(tmp_path: pathlib.Path) -> None:
    gpus = mig_node()
    host = host_with(tmp_path, gpus, nvml=emulated_pynvml(gpus))
    node = accelkit.detect_node(host)
    nvidia = [d for d in node.devices if d.family == "nvidia"]
    assert [d.id for d in nvidia] == [A100_MIGS[0].uuid, A100_MIGS[1].uuid, "1", "2"]
    assert node.resources["GPU"] == 4.0
    assert node.resources["accelerator_type:A100-1g.5gb"] == 1.0
    assert node.resources["accelerator_type:A100"] == 1.0


@pytest.mark.parametrize("mig_monitor", [False, True])
def test_a_mig_gpu_is_not_asked_its_own_memory(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any], mig_monitor: bool
) -> None:
    # nvml.h: in MIG mode a GPU's own memory is answered only to a privileged caller (the MIG
    # monitor capability), NO_PERMISSION to others: the usual answer inside a container.
    gpus = mig_node()
    nvml = emulated_pynvml(gpus, mig_monitor=mig_monitor)
    host = host_with(tmp_path, gpus, nvml=nvml, smi=(0, nvidia_hosts.nvidia_smi_output(gpus)))
    devices, notes = run_detect(MANAGER, host)
    assert [(d.id, d.source, d.memory_bytes) for d in devices] == [
        (A100_MIGS[0].uuid, "library", A100_MIGS[0].memory_bytes),
        (A100_MIGS[1].uuid, "library", A100_MIGS[1].memory_bytes),
        ("1", "library", gpus[1].memory_bytes),
        ("2", "library", gpus[2].memory_bytes),
    ]
    assert "warning" not in notes
    assert "does not report its memory" not in notes


def test_a_mig_gpu_without_instances_is_left_out(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    gpus = [dataclasses.replace(g, migs=(), mig_mode=1) for g in fake.fake_gpus(2)]
    devices, notes = run_detect(MANAGER, host_with(tmp_path, gpus, nvml=emulated_pynvml(gpus)))
    assert devices == []
    assert "warning: GPU 0 is left out: MIG is enabled and it has no MIG instances" in notes


def test_mig_instances_nvml_cannot_list_leave_the_gpu_out(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    # nvml.h lists UNINITIALIZED, INVALID_ARGUMENT and UNKNOWN for nvmlDeviceGetMaxMigDeviceCount
    gpus = mig_node()
    failing = {"nvmlDeviceGetMaxMigDeviceCount": pynvml.NVML_ERROR_UNKNOWN}
    nvml = emulated_pynvml(gpus, errors=failing)
    host = host_with(tmp_path, gpus, nvml=nvml, smi=(0, nvidia_hosts.nvidia_smi_output(gpus)))
    devices, notes = run_detect(MANAGER, host)
    assert [d.id for d in devices] == ["1", "2"]
    assert "library layer failed: NVMLError_Unknown: Unknown Error" in notes
    assert "warning: GPU 0 is left out: MIG is enabled" in notes
    assert nvml.calls["nvmlShutdown"] == 1


def test_a_mig_mode_nvml_cannot_read_fails_the_layer_instead_of_offering_the_gpu_whole(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    gpus = mig_node()
    failing = {"nvmlDeviceGetMigMode": pynvml.NVML_ERROR_UNKNOWN}
    nvml = emulated_pynvml(gpus, errors=failing, mig_monitor=True)  # GPU 0's memory answers
    host = host_with(tmp_path, gpus, nvml=nvml, smi=(0, nvidia_hosts.nvidia_smi_output(gpus)))
    devices, notes = run_detect(MANAGER, host)
    assert [(d.id, d.source) for d in devices] == [("1", "command"), ("2", "command")]
    assert "library layer failed: NVMLError_Unknown: Unknown Error" in notes
    assert "warning: GPU 0 is left out: MIG is enabled" in notes


def test_nvidia_smi_layer(tmp_path: pathlib.Path, run_detect: Callable[..., Any]) -> None:
    gpus = fake.fake_gpus(8)
    devices, notes = run_detect(
        MANAGER, host_with(tmp_path, gpus, smi=(0, nvidia_hosts.nvidia_smi_output(gpus)))
    )
    assert [d.id for d in devices] == [str(n) for n in range(8)]
    assert {d.source for d in devices} == {"command"}
    assert devices[4].pci_bus_id == "0000:9a:00.0"  # "00000000:9A:00.0" as nvidia-smi prints it
    assert devices[4].numa_node == 1
    assert devices[0].memory_bytes == 81559 * fake.MIB
    assert "Python library pynvml is not installed" in notes


def test_nvidia_smi_leaves_mig_gpus_out(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    gpus = mig_node()
    devices, notes = run_detect(
        MANAGER, host_with(tmp_path, gpus, smi=(0, nvidia_hosts.nvidia_smi_output(gpus)))
    )
    assert [d.id for d in devices] == ["1", "2"]
    assert "warning: GPU 0 is left out: MIG is enabled; MIG instances are listed only" in notes


@pytest.mark.parametrize(
    ("answer", "expected_note"),
    [
        (
            (9, "", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"),
            "exited with 9",
        ),
        (TimeoutError("nvidia-smi did not finish within 10s"), "error: `nvidia-smi"),
        ((0, "No devices were found\n"), "had no usable rows"),
        ((0, "x, y, z, w, v, u\n"), "command layer failed"),
    ],
)
def test_a_broken_nvidia_smi_gives_the_proc_layer(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any], answer: Any, expected_note: str
) -> None:
    gpus = fake.fake_gpus(2)
    devices, notes = run_detect(MANAGER, host_with(tmp_path, gpus, smi=answer, proc=True))
    assert [(d.id, d.source) for d in devices] == [("0", "sysfs"), ("1", "sysfs")]
    assert expected_note in notes


def test_proc_layer_numbers_by_bus_id_not_device_minor(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    gpus = fake.fake_gpus(4)
    devices, _ = run_detect(MANAGER, host_with(tmp_path, gpus, proc=True))
    assert [g.minor for g in gpus] == [4, 5, 6, 7]
    assert [(d.id, d.pci_bus_id, d.uuid) for d in devices] == [
        (str(n), g.bus_id, g.uuid) for n, g in enumerate(gpus)
    ]
    assert {d.type_label for d in devices} == {"H100"}
    assert devices[0].memory_bytes is None


def test_proc_layer_leaves_gpus_with_mig_instances_out(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    devices, notes = run_detect(MANAGER, host_with(tmp_path, mig_node(), proc=True))
    assert [d.id for d in devices] == ["1", "2"]
    assert "GPU 0 is left out: it has MIG instances" in notes


def test_an_unreadable_information_file_leaves_its_gpu_out_and_keeps_the_numbering(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    # Without its Device Minor, nothing says whether the GPU has MIG instances: it could be
    # handed out whole by index while partitioned, so it is left out; the others keep NVML's
    # numbering by bus id.
    gpus = fake.fake_gpus(3)
    host = host_with(tmp_path, gpus, proc=True)
    (tmp_path / "proc/driver/nvidia/gpus" / gpus[1].bus_id / "information").write_bytes(b"\0\x01")
    devices, notes = run_detect(MANAGER, host)
    assert [(d.id, d.type_label, d.pci_bus_id) for d in devices] == [
        ("0", "H100", gpus[0].bus_id),
        ("2", "H100", gpus[2].bus_id),
    ]
    assert "warning: GPU 1 is left out: no Device Minor" in notes


def test_no_nvidia_stack_gives_no_devices(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    devices, notes = run_detect(MANAGER, accelkit.FakeHost(root=tmp_path))
    assert devices == []
    assert "nvidia-smi is not installed" in notes
    assert "no detection layer answered" in notes


def test_mixed_models_are_reported_per_device(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    gpus = fake.fake_gpus(2)
    gpus[1] = dataclasses.replace(gpus[1], name="Tesla T4", memory_bytes=15360 * fake.MIB)
    devices, _ = run_detect(MANAGER, host_with(tmp_path, gpus, nvml=emulated_pynvml(gpus)))
    assert [d.type_label for d in devices] == ["H100", "T4"]


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(max_size=300))
def test_any_nvidia_smi_output_never_raises(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any], output: str
) -> None:
    devices, _ = run_detect(
        MANAGER, accelkit.FakeHost(root=tmp_path, commands={"nvidia-smi": (0, output)})
    )
    assert isinstance(devices, list)


# -- part 3: fake hosts and the snapshot -------------------------------------------------------
@pytest.mark.parametrize("count", [0, 1, 2, 8])
def test_make_host_has_count_gpus(check_make_host: Callable[..., Any], count: int) -> None:
    check_make_host(MANAGER, nvidia_hosts.make_host, count)


def test_the_fake_h100s_print_what_the_recorded_h100_node_prints() -> None:
    # H100s are MIG-capable: the recorded node's nvidia-smi says "Disabled", not "[N/A]".
    recorded = load_snapshot(SNAPSHOT).run(nvidia_hosts.NVIDIA_SMI_ARGV).stdout
    assert nvidia_hosts.nvidia_smi_output(fake.fake_gpus(8)) == recorded


@pytest.mark.parametrize("hand_written", [False, True], ids=["emulated", "hand-written"])
def test_a_fake_h100_has_mig_off_and_its_instances_are_h100_profiles(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any], hand_written: bool
) -> None:
    gpus = fake.fake_gpus(2)
    gpus[1] = dataclasses.replace(gpus[1], migs=(fake.FakeMig("MIG-1"),), mig_mode=1)
    nvml = fake.fake_pynvml(gpus) if hand_written else emulated_pynvml(gpus)
    nvml.nvmlInit()
    assert list(nvml.nvmlDeviceGetMigMode(nvml.nvmlDeviceGetHandleByIndex(0))) == [0, 0]
    nvml.nvmlShutdown()
    devices, _ = run_detect(MANAGER, host_with(tmp_path, gpus, nvml=nvml))
    assert [(d.id, d.model, d.type_label, d.memory_bytes) for d in devices] == [
        ("0", "NVIDIA H100 80GB HBM3", "H100", 81559 * fake.MIB),
        ("MIG-1", "NVIDIA H100 80GB HBM3 MIG 1g.10gb", "H100-1g.10gb", 9984 * fake.MIB),
    ]


def test_mig_instances_exist_only_while_mig_is_enabled() -> None:
    with pytest.raises(ValueError, match="MIG instances exist only while MIG is enabled"):
        dataclasses.replace(fake.fake_gpus(1)[0], migs=(fake.FakeMig("MIG-1"),))


def test_snapshot_of_an_h100_node(check_snapshot: Callable[..., Any]) -> None:
    devices = check_snapshot(MANAGER, SNAPSHOT, 8, "H100")
    assert [d.numa_node for d in devices] == [0, 0, 0, 0, 1, 1, 1, 1]


def test_snapshot_proc_files_alone_give_the_same_gpus(tmp_path: pathlib.Path) -> None:
    replay = load_snapshot(SNAPSHOT)
    without_smi = accelkit.FakeHost(root=SNAPSHOT / "root", env=dict(replay.env))
    by_proc = MANAGER.detect(without_smi)
    by_smi = MANAGER.detect(replay)
    assert [(d.id, d.uuid, d.pci_bus_id, d.type_label) for d in by_proc] == [
        (d.id, d.uuid, d.pci_bus_id, d.type_label) for d in by_smi
    ]


def damaged_snapshot(tmp_path: pathlib.Path) -> pathlib.Path:
    """A copy of the recorded 8-GPU node, for a test to damage."""
    copy = tmp_path / "node"
    shutil.copytree(SNAPSHOT, copy)
    return copy


def test_proc_layer_leaves_out_a_gpu_the_driver_excludes(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    # NVreg_ExcludedGpus: the driver keeps the GPU's /proc directory, says "GPU Excluded: Yes",
    # and does not initialise it, so neither NVML nor CUDA counts it. It was offered, and the
    # GPUs after it kept numbers one too high: CUDA's GPU 2 was called 3.
    node = damaged_snapshot(tmp_path)
    gpus = node / "root/proc/driver/nvidia/gpus"
    buses = sorted(p.name for p in gpus.iterdir())
    information = gpus / buses[1] / "information"
    information.write_text(information.read_text().replace("Excluded:\t No", "Excluded:\t Yes"))
    expected = [information_uuid(gpus / bus) for bus in buses if bus != buses[1]]
    devices, notes = run_detect(MANAGER, accelkit.FakeHost(root=node / "root"))
    assert [(d.id, d.uuid, d.source) for d in devices] == [
        (str(n), uuid, "sysfs") for n, uuid in enumerate(expected)
    ]
    assert (
        f"warning: the GPU at {buses[1]} is left out: the driver excludes it (GPU Excluded: Yes"
        in notes
    )


def information_uuid(directory: pathlib.Path) -> str:
    """The ``GPU UUID`` an information file names."""
    (line,) = (x for x in (directory / "information").read_text().splitlines() if "UUID" in x)
    return line.split(":", 1)[1].strip()


LOST_LINE = "Unable to determine the device handle for GPU0000:3A:00.0: Unknown Error"
"""What nvidia-smi prints for a GPU it cannot reach, as users report it (its wording unverified)."""


def smi_losing_gpu_2(node: pathlib.Path, status: int) -> None:
    """The recorded nvidia-smi query exits ``status``, printing :data:`LOST_LINE` for GPU 2."""
    manifest = json.loads((node / "snapshot.json").read_text())
    (smi,) = (c for c in manifest["commands"] if c["argv"] == list(nvidia_hosts.NVIDIA_SMI_ARGV))
    rows = smi["stdout"].splitlines()
    smi.update(returncode=status, stdout="\n".join([*rows[:2], LOST_LINE, *rows[3:]]) + "\n")
    (node / "snapshot.json").write_text(json.dumps(manifest))


def test_a_gpu_nvidia_smi_cannot_reach_is_left_out_and_the_others_keep_their_numbers(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    # nvidia-smi exits 15 ("GPU has fallen off the bus or has otherwise become inaccessible") and
    # prints the healthy GPUs' rows with a line for the lost one. The command layer failed, the
    # /proc layer then offered the lost GPU to grants, and the warning quoted a healthy row.
    node = damaged_snapshot(tmp_path)
    smi_losing_gpu_2(node, 15)
    devices, notes = run_detect(MANAGER, load_snapshot(node))
    assert [(d.id, d.pci_bus_id, d.source) for d in devices] == [
        (str(n), bus, "command") for n, bus in enumerate(fake.BUS_IDS) if n != 2
    ]
    assert (
        f"warning: GPU 0000:3a:00.0 is left out: nvidia-smi cannot reach it ({LOST_LINE!r}, "
        "exit status 15: fallen off the bus or otherwise inaccessible)" in notes
    )
    assert "command layer failed" not in notes and "exited with" not in notes
    node_devices = accelkit.detect_node(load_snapshot(node)).devices
    assert [d.id for d in node_devices if d.family == "nvidia"] == [
        "0",
        "1",
        "3",
        "4",
        "5",
        "6",
        "7",
    ]


def test_nvidia_smi_failing_otherwise_still_fails_its_layer(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    node = damaged_snapshot(tmp_path)
    smi_losing_gpu_2(node, 9)  # not "fallen off the bus": the rows are not trusted
    devices, notes = run_detect(MANAGER, load_snapshot(node))
    assert [d.source for d in devices] == ["sysfs"] * 8
    assert f"exited with 9: {LOST_LINE}" in notes  # the error line, not the last row
    manifest = json.loads((node / "snapshot.json").read_text())
    (smi,) = (c for c in manifest["commands"] if c["argv"] == list(nvidia_hosts.NVIDIA_SMI_ARGV))
    smi.update(returncode=15, stdout=smi["stdout"].replace(LOST_LINE, "Unknown Error"))
    (node / "snapshot.json").write_text(json.dumps(manifest))
    devices, notes = run_detect(MANAGER, load_snapshot(node))  # 15 naming no GPU: no answer
    assert [d.source for d in devices] == ["sysfs"] * 8
    assert "exited with 15: Unknown Error" in notes


def test_compute_modes_are_read_beside_a_gpu_nvidia_smi_cannot_reach(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    gpus = fake.fake_gpus(4)
    gpus[3] = dataclasses.replace(gpus[3], compute_mode=2)  # Prohibited
    lost = f"Unable to determine the device handle for GPU{gpus[1].bus_id.upper()}: GPU is lost"
    rows = nvidia_hosts.nvidia_smi_output(gpus).splitlines()
    modes = nvidia_hosts.compute_mode_output(gpus).splitlines()
    nvidia_hosts.write_sysfs(tmp_path, gpus)
    host = accelkit.FakeHost(
        root=tmp_path,
        commands={
            nvidia_hosts.NVIDIA_SMI_ARGV: (15, "\n".join([rows[0], lost, *rows[2:]])),
            nvidia_hosts.COMPUTE_MODE_ARGV: (15, "\n".join([modes[0], lost, *modes[2:]])),
        },
    )
    devices, notes = run_detect(MANAGER, host)
    assert [(d.id, d.offered) for d in devices] == [("0", True), ("2", True), ("3", False)]
    assert "gave no compute modes" not in notes


@pytest.mark.parametrize("call", ["nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex"])
def test_an_nvml_query_that_hangs_costs_the_library_layer_only(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, call: str
) -> None:
    # Only NVML's import, init and shutdown were bounded: a query after nvmlInit that never
    # returned (a hung driver) held the whole family to the detection's deadline ("detect() did
    # not finish"), nvidia-smi and /proc were never asked, and later detections skipped nvidia.
    monkeypatch.setenv("ACCELKIT_LIBRARY_TIMEOUT", "0.3")
    monkeypatch.setenv("ACCELKIT_DETECT_TIMEOUT", "3")
    gpus = fake.fake_gpus(2)
    nvml, release, calls = fake.fake_pynvml(gpus), threading.Event(), []
    answer = getattr(nvml, call)

    def hangs(*args: Any) -> Any:
        calls.append(args)
        release.wait()
        return answer(*args)

    setattr(nvml, call, hangs)
    host = host_with(tmp_path, gpus, nvml=nvml, smi=(0, nvidia_hosts.nvidia_smi_output(gpus)))
    try:
        first, second = accelkit.detect_node(host), accelkit.detect_node(host)
    finally:
        release.set()
    for node in (first, second):
        assert [(d.id, d.source) for d in node.devices] == [("0", "command"), ("1", "command")]
    errors = [
        [d.message for d in n.diagnostics if d.family == "nvidia" and d.level == "error"]
        for n in (first, second)
    ]
    assert errors[0] == [
        f"library layer timed out: pynvml.{call}() did not return within 0.3s "
        "(ACCELKIT_LIBRARY_TIMEOUT); pynvml is not used again until it returns"
    ]
    (again,) = errors[1]  # the thread still stuck in NVML is not joined by another
    assert again.startswith(f"library layer timed out: pynvml.{call}() has not returned from an")
    assert again.endswith("; pynvml is not used again until it returns")
    assert len(calls) == 1 and nvml.calls["nvmlInit"] == 1
