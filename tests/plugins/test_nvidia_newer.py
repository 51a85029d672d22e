"""NVIDIA on 2025-2026 hardware: compute modes, MIG profile labels, Jetson/Tegra GPUs.

NVML runs as the real wrapper (nvidia-ml-py) over an emulated ``libnvidia-ml``; nvidia-smi and the
Tegra files are faked as the hosts print and lay them out.
"""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Any, Callable

import accelkit
import pynvml
import pytest
from accelkit.testing.fakes import nvidia as fake
from accelkit.testing.fakes.nvml_c import emulated_pynvml
from accelkit_plugins.nvidia import NvidiaManager
from accelkit_plugins.nvidia import testing as nvidia_hosts

MANAGER = NvidiaManager()
DEFAULT, PROHIBITED, EXCLUSIVE_PROCESS = (
    pynvml.NVML_COMPUTEMODE_DEFAULT,
    pynvml.NVML_COMPUTEMODE_PROHIBITED,
    pynvml.NVML_COMPUTEMODE_EXCLUSIVE_PROCESS,
)


def three_modes() -> list[fake.FakeGpu]:
    """GPU 0 Default, GPU 1 Prohibited, GPU 2 Exclusive_Process."""
    modes = (DEFAULT, PROHIBITED, EXCLUSIVE_PROCESS)
    return [dataclasses.replace(g, compute_mode=m) for g, m in zip(fake.fake_gpus(3), modes)]


def nvml_host(root: pathlib.Path, gpus: list[fake.FakeGpu], nvml: Any) -> accelkit.FakeHost:
    nvidia_hosts.write_sysfs(root, gpus)
    return accelkit.FakeHost(root=root, modules={"pynvml": nvml})


def smi_host(root: pathlib.Path, gpus: list[fake.FakeGpu], modes: bool = True) -> accelkit.FakeHost:
    nvidia_hosts.write_sysfs(root, gpus)
    commands = {nvidia_hosts.NVIDIA_SMI_ARGV: (0, nvidia_hosts.nvidia_smi_output(gpus))}
    if modes:
        commands[nvidia_hosts.COMPUTE_MODE_ARGV] = (0, nvidia_hosts.compute_mode_output(gpus))
    return accelkit.FakeHost(root=root, commands=commands)


# -- compute modes -------------------------------------------------------------------------------
@pytest.mark.parametrize("layer", ["nvml", "nvidia-smi"])
def test_a_prohibited_gpu_is_not_offered_and_an_exclusive_one_is_whole(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any], layer: str
) -> None:
    gpus = three_modes()
    if layer == "nvml":
        host = nvml_host(tmp_path, gpus, emulated_pynvml(gpus))
    else:
        host = smi_host(tmp_path, gpus)
    devices, notes = run_detect(MANAGER, host)
    assert [(d.id, d.exclusive, d.offered) for d in devices] == [
        ("0", False, True),
        ("1", False, False),  # CUDA counts it: returned, so that detection knows it is there
        ("2", True, True),
    ]
    assert "warning: GPU 1 is in the Prohibited compute mode (no process may use it)" in notes
    # named by bus id for nvidia-smi: GPU 1 need not be nvidia-smi's index 1 (a device cgroup)
    bus = devices[1].pci_bus_id
    assert bus is not None and f"`nvidia-smi -i 0000{bus} -c default`" in notes.lower()
    assert "GPU 2 is in the Exclusive_Process compute mode: offered whole, to one grant" in notes


def test_an_exclusive_process_gpu_is_granted_whole_to_one_grant(tmp_path: pathlib.Path) -> None:
    gpus = three_modes()
    node = accelkit.detect_node(nvml_host(tmp_path, gpus, emulated_pynvml(gpus)))
    assert node.resources["GPU"] == 2.0
    assert any("Prohibited" in d.message for d in node.diagnostics if d.level == "warning")
    alloc = accelkit.Allocator(accelkit.Node.from_dict(node.to_dict()))
    shares = [alloc.acquire({"GPU": 0.25}) for _ in range(5)]
    assert [g.ids for g in shares if g] == [{"GPU": ["0"]}] * 4
    assert shares[4] is None  # GPU 2 is free, and takes no fraction
    whole = alloc.acquire({"GPU": 1})
    assert whole is not None and whole.ids == {"GPU": ["2"]}


def test_without_the_mode_query_every_gpu_is_offered_as_in_default(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    # A snapshot recorded before compute modes were asked has the documented query only.
    devices, notes = run_detect(MANAGER, smi_host(tmp_path, three_modes(), modes=False))
    assert [(d.id, d.exclusive) for d in devices] == [("0", False), ("1", False), ("2", False)]
    assert (
        "info: `nvidia-smi --query-gpu=index,compute_mode --format=csv,noheader` gave no " in notes
    )
    assert "nvidia-smi is not installed" not in notes  # it has just answered the first query


def test_a_mig_gpu_in_prohibited_mode_offers_no_instance(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    migs = (fake.FakeMig("MIG-11111111-2222-3333-4444-000000000001"),)
    gpus = [
        dataclasses.replace(fake.fake_gpus(1)[0], migs=migs, mig_mode=1, compute_mode=PROHIBITED)
    ]
    devices, notes = run_detect(MANAGER, nvml_host(tmp_path, gpus, emulated_pynvml(gpus)))
    assert [(d.id, d.parent, d.offered) for d in devices] == [(migs[0].uuid, "0", False)]
    assert "Prohibited compute mode" in notes
    assert accelkit.detect_node(nvml_host(tmp_path, gpus, emulated_pynvml(gpus))).devices == []


@pytest.mark.parametrize(
    ("value", "offered"),
    [
        # CUDA counts a Prohibited GPU: the list goes on past it, and GPU 2 keeps ordinal 2
        ("0,1,2", [("0", 0), ("2", 2)]),
        ("2,1,0", [("2", 0), ("0", 2)]),
        (  # by UUID too
            "GPU-00000000-0000-0000-0000-000000000001,GPU-00000000-0000-0000-0000-000000000002",
            [("GPU-00000000-0000-0000-0000-000000000002", 1)],
        ),
        ("1", []),  # the Prohibited GPU alone: no stand-in GPU made of the variable
    ],
)
def test_cuda_visible_devices_naming_a_prohibited_gpu_reads_on_past_it(
    tmp_path: pathlib.Path, value: str, offered: list[tuple[str, int]]
) -> None:
    gpus = [dataclasses.replace(g, compute_mode=DEFAULT) for g in three_modes()]
    gpus[1] = dataclasses.replace(gpus[1], compute_mode=PROHIBITED)
    nvidia_hosts.write_sysfs(tmp_path, gpus)
    env = {"CUDA_VISIBLE_DEVICES": value}
    host = accelkit.FakeHost(root=tmp_path, env=env, modules={"pynvml": emulated_pynvml(gpus)})
    node = accelkit.detect_node(host)
    assert [(d.id, d.index) for d in node.devices] == offered
    assert node.detected == {"nvidia": 3}
    warnings = [d.message for d in node.diagnostics if d.level == "warning"]
    assert len(warnings) == 1 and "GPU 1 is in the Prohibited compute mode" in warnings[0]


# -- MIG profiles ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("NVIDIA H100 80GB HBM3 MIG 1g.10gb", "H100-1g.10gb"),
        ("NVIDIA H100 80GB HBM3 MIG 1g.10gb+me", "H100-1g.10gb+me"),
        ("NVIDIA H100 80GB HBM3 MIG 1c.3g.40gb", "H100-1c.3g.40gb"),
        ("NVIDIA H100 80GB HBM3 MIG 3g.40gb", "H100-3g.40gb"),
        ("NVIDIA H200 MIG 1g.23gb", "H200-1g.23gb"),
        (
            "NVIDIA RTX PRO 6000 Blackwell Server Edition MIG 1g.24gb+gfx",
            "RTX-PRO-6000-1g.24gb+gfx",
        ),
    ],
)
def test_mig_labels_keep_media_and_compute_instance_profiles_distinct(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any], name: str, label: str
) -> None:
    parent = name.split(" MIG ")[0]
    migs = (fake.FakeMig("MIG-1", name),)
    gpus = [dataclasses.replace(fake.fake_gpus(1, name=parent)[0], migs=migs, mig_mode=1)]
    devices, _ = run_detect(MANAGER, nvml_host(tmp_path, gpus, emulated_pynvml(gpus)))
    assert [(d.id, d.type_label) for d in devices] == [("MIG-1", label)]


# -- Jetson / Tegra --------------------------------------------------------------------------------
JETSON_UNANSWERED = {
    "nvmlDeviceGetPciInfo_v3": pynvml.NVML_ERROR_NOT_SUPPORTED,
    "nvmlDeviceGetMemoryInfo": pynvml.NVML_ERROR_NOT_SUPPORTED,
    "nvmlDeviceGetMemoryInfo_v2": pynvml.NVML_ERROR_NOT_SUPPORTED,
    "nvmlDeviceGetComputeMode": pynvml.NVML_ERROR_FUNCTION_NOT_FOUND,
    "nvmlDeviceGetMigMode": pynvml.NVML_ERROR_NOT_SUPPORTED,
}


def test_nvml_fields_a_jetson_cannot_answer_degrade_one_by_one(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    gpus = [dataclasses.replace(fake.fake_gpus(1)[0], name="Orin (nvgpu)")]
    nvml = emulated_pynvml(gpus, errors=JETSON_UNANSWERED)
    devices, notes = run_detect(MANAGER, accelkit.FakeHost(root=tmp_path, modules={"pynvml": nvml}))
    assert len(devices) == 1
    gpu = devices[0]
    assert (gpu.id, gpu.source, gpu.type_label, gpu.uuid) == (
        "0",
        "library",
        "Jetson-Orin",
        gpus[0].uuid,
    )
    assert (gpu.memory_bytes, gpu.pci_bus_id, gpu.exclusive) == (None, None, False)
    assert "GPU 0 does not report its PCI bus id to NVML (NVMLError_NotSupported)" in notes
    assert f"Orin (nvgpu) ({gpus[0].uuid}) does not report its memory to NVML" in notes
    assert "does not report its compute mode to NVML (NVMLError_FunctionNotFound)" in notes
    assert "warning" not in notes
    assert nvml.calls["nvmlShutdown"] == 1


def test_a_gpu_without_name_or_uuid_is_kept(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    gpus = fake.fake_gpus(2)
    unanswered = {"nvmlDeviceGetUUID": pynvml.NVML_ERROR_NOT_SUPPORTED}
    nvml = emulated_pynvml(gpus, errors=unanswered)
    devices, notes = run_detect(MANAGER, nvml_host(tmp_path, gpus, nvml))
    assert [(d.id, d.uuid, d.type_label) for d in devices] == [
        ("0", None, "H100"),
        ("1", None, "H100"),
    ]
    assert "GPU 1 does not report its UUID to NVML" in notes


def test_other_nvml_errors_still_fail_the_layer(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    gpus = fake.fake_gpus(1)
    nvml = emulated_pynvml(gpus, errors={"nvmlDeviceGetComputeMode": pynvml.NVML_ERROR_UNKNOWN})
    devices, notes = run_detect(MANAGER, nvml_host(tmp_path, gpus, nvml))
    assert devices == []
    assert "warning: library layer failed: NVMLError_Unknown" in notes


def tegra_tree(
    root: pathlib.Path,
    *,
    release: bool = True,
    family: str = "Tegra",
    gpu_file: str = "dev/nvgpu/igpu0/ctrl",
) -> accelkit.FakeHost:
    """A Jetson AGX Orin as JetPack 6 lays it out: L4T's release file, the SoC's sysfs entries,
    the nvgpu driver's device files; no NVML, no nvidia-smi, nothing under /proc/driver/nvidia."""
    files = {
        "sys/devices/soc0/family": f"{family}\n",
        "sys/devices/soc0/soc_id": "35\n",
        "sys/devices/soc0/machine": "NVIDIA Jetson AGX Orin Developer Kit\n",
        "dev/nvmap": "",
    }
    if release:
        files["etc/nv_tegra_release"] = (
            "# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic\n"
        )
    if gpu_file:
        files[gpu_file] = ""
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return accelkit.FakeHost(root=root)


def test_a_jetson_without_nvml_or_nvidia_smi_is_found_from_its_tegra_files(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    devices, notes = run_detect(MANAGER, tegra_tree(tmp_path))
    assert [(d.id, d.index, d.source, d.type_label) for d in devices] == [
        ("0", 0, "devfs", "Jetson-Orin")
    ]
    assert devices[0].model == "NVIDIA Jetson AGX Orin Developer Kit"
    assert (devices[0].uuid, devices[0].memory_bytes, devices[0].pci_bus_id) == (None, None, None)
    assert "Tegra GPU found from /dev/nvgpu/igpu0" in notes
    node = accelkit.detect_node(tegra_tree(tmp_path))
    assert node.resources == {"GPU": 1.0, "accelerator_type:Jetson-Orin": 1.0}


@pytest.mark.parametrize(
    ("release", "family", "gpu_file"),
    [
        (False, "Tegra", "dev/nvgpu/igpu0/ctrl"),  # the SoC family alone says Tegra
        (True, "", "dev/nvhost-ctrl-gpu"),  # JetPack 4 and 5: the nvhost GPU file
    ],
)
def test_either_tegra_marker_and_either_gpu_file_will_do(
    tmp_path: pathlib.Path,
    run_detect: Callable[..., Any],
    release: bool,
    family: str,
    gpu_file: str,
) -> None:
    host = tegra_tree(tmp_path, release=release, family=family, gpu_file=gpu_file)
    devices, _ = run_detect(MANAGER, host)
    assert [d.id for d in devices] == ["0"]


def test_tegra_files_are_read_only_after_the_other_layers(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any]
) -> None:
    host = tegra_tree(tmp_path)
    gpus = [dataclasses.replace(fake.fake_gpus(1)[0], name="Orin (nvgpu)")]
    nvml = emulated_pynvml(gpus, errors=JETSON_UNANSWERED)
    with_nvml = accelkit.FakeHost(root=tmp_path, modules={"pynvml": nvml})
    devices, _ = run_detect(MANAGER, with_nvml)
    assert [(d.source, d.type_label) for d in devices] == [("library", "Jetson-Orin")]
    assert run_detect(MANAGER, host)[0][0].source == "devfs"


@pytest.mark.parametrize(
    ("tree", "expected"),
    [
        ({"release": True, "gpu_file": ""}, "warning: a Tegra system"),  # container without them
        ({"release": False, "family": "Samsung Exynos"}, "no detection layer answered"),
    ],
)
def test_no_gpu_is_guessed(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any], tree: dict[str, Any], expected: str
) -> None:
    devices, notes = run_detect(MANAGER, tegra_tree(tmp_path, **tree))
    assert devices == []
    assert expected in notes
