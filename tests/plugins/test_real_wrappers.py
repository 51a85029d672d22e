"""The NVIDIA and AMD plugins against the vendors' real Python wrappers, C libraries emulated.

Each test runs the real ``pynvml`` (nvidia-ml-py) or ``amdsmi`` package, the installed release
and older ones whose return shapes differ (pynvml 11.495 returns ``bytes``; amdsmi 6.0 returns
``vram_size_mb``, an int ``device_id`` and the raw hex serial), with only ``libnvidia-ml`` and
``libamd_smi`` emulated (:mod:`accelkit.testing.fakes.nvml_c`, :mod:`~.amdsmi_c`). Older releases
are fetched once per cache with pip (``--no-deps --target``); without the package registry
their cases are skipped, saying why. The last tests hold the hand-written fakes to the real
wrappers: same exception classes, same messages.
"""

from __future__ import annotations

import dataclasses
import pathlib
import sys
from typing import Any, Callable, Optional

import accelkit
import pynvml
import pytest
from accelkit.testing.fakes import amd, nvidia
from accelkit.testing.fakes.amdsmi_c import emulated_amdsmi
from accelkit.testing.fakes.nvml_c import emulated_pynvml
from accelkit_plugins.amd import AmdManager
from accelkit_plugins.amd import testing as amd_hosts
from accelkit_plugins.nvidia import NvidiaManager
from accelkit_plugins.nvidia import testing as nvidia_hosts
from vendor_wrappers import AMDSMI_LATEST, Fetch

INSTALLED = "installed"
A100_MIGS = (
    nvidia.FakeMig(
        "MIG-11111111-2222-3333-4444-000000000001",
        "NVIDIA A100-SXM4-40GB MIG 1g.5gb",
        4864 * nvidia.MIB,
    ),
    nvidia.FakeMig(
        "MIG-11111111-2222-3333-4444-000000000002",
        "NVIDIA A100-SXM4-40GB MIG 3g.20gb",
        19968 * nvidia.MIB,
    ),
)


@pytest.fixture(params=[INSTALLED, "12.535.161", "11.495.46"])
def pynvml_source(request: pytest.FixtureRequest, fetch_release: Fetch) -> Optional[pathlib.Path]:
    """The ``pynvml.py`` of one nvidia-ml-py release (None: the installed one)."""
    if request.param == INSTALLED:
        return None
    return fetch_release("nvidia-ml-py", request.param) / "pynvml.py"


@pytest.fixture(params=[AMDSMI_LATEST, "6.2.4", "6.0.2"])
def amdsmi_package(request: pytest.FixtureRequest, fetch_release: Fetch) -> pathlib.Path:
    """The ``amdsmi`` package directory of one release (none is installed: see conftest)."""
    return fetch_release("amdsmi", request.param) / "amdsmi"


def nvml_host(
    tmp_path: pathlib.Path, gpus: list[nvidia.FakeGpu], module: Any, smi: bool = False
) -> accelkit.FakeHost:
    """A host with the emulated NVML, the GPUs' sysfs, and nvidia-smi when asked."""
    nvidia_hosts.write_sysfs(tmp_path, gpus)
    commands = (
        {nvidia_hosts.NVIDIA_SMI_ARGV: (0, nvidia_hosts.nvidia_smi_output(gpus))} if smi else {}
    )
    return accelkit.FakeHost(root=tmp_path, commands=commands, modules={"pynvml": module})


# -- NVIDIA ------------------------------------------------------------------------------------
def test_nvml_gives_every_fact_of_eight_h100s(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any], pynvml_source: Optional[pathlib.Path]
) -> None:
    gpus = nvidia.fake_gpus(8)
    nvml = emulated_pynvml(gpus, source=pynvml_source)
    devices, notes = run_detect(NvidiaManager(), nvml_host(tmp_path, gpus, nvml))
    assert [(d.id, d.index, d.source) for d in devices] == [
        (str(n), n, "library") for n in range(8)
    ]
    assert [(d.uuid, d.pci_bus_id, d.model) for d in devices] == [
        (g.uuid, g.bus_id, g.name) for g in gpus
    ]
    assert {(d.type_label, d.memory_bytes) for d in devices} == {("H100", 81559 * nvidia.MIB)}
    assert [d.numa_node for d in devices] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert (nvml.calls["nvmlInitWithFlags"], nvml.calls["nvmlShutdown"]) == (1, 1)
    assert "8 device(s) from the library layer" in notes


def test_nvml_mig_instances_take_the_place_of_their_gpu(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any], pynvml_source: Optional[pathlib.Path]
) -> None:
    gpus = nvidia.fake_gpus(3, name="NVIDIA A100-SXM4-40GB")
    gpus[0] = dataclasses.replace(gpus[0], migs=A100_MIGS, mig_mode=1)
    gpus[2] = dataclasses.replace(gpus[2], migs=(), mig_mode=0)  # MIG-capable, MIG off
    nvml = emulated_pynvml(gpus, source=pynvml_source)
    devices, _ = run_detect(NvidiaManager(), nvml_host(tmp_path, gpus, nvml))
    assert [(d.id, d.parent, d.type_label) for d in devices] == [
        (A100_MIGS[0].uuid, "0", "A100-1g.5gb"),
        (A100_MIGS[1].uuid, "0", "A100-3g.20gb"),
        ("1", None, "A100"),
        ("2", None, "A100"),
    ]
    assert [d.memory_bytes for d in devices[:2]] == [m.memory_bytes for m in A100_MIGS]
    assert {d.pci_bus_id for d in devices[:2]} == {gpus[0].bus_id}


def test_nvml_memory_not_supported_keeps_the_gpu_without_its_memory(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any], pynvml_source: Optional[pathlib.Path]
) -> None:
    gpus = nvidia.fake_gpus(2)
    nvml = emulated_pynvml(gpus, source=pynvml_source, unsupported={gpus[1].uuid})
    devices, notes = run_detect(NvidiaManager(), nvml_host(tmp_path, gpus, nvml))
    assert [(d.id, d.source, d.memory_bytes) for d in devices] == [
        ("0", "library", 81559 * nvidia.MIB),
        ("1", "library", None),
    ]
    assert f"NVIDIA H100 80GB HBM3 ({gpus[1].uuid}) does not report its memory" in notes
    assert "warning" not in notes


@pytest.mark.parametrize(
    ("code", "error"),
    [
        (
            "NVML_ERROR_LIBRARY_NOT_FOUND",
            "NVMLError_LibraryNotFound: NVML Shared Library Not Found",
        ),
        ("NVML_ERROR_DRIVER_NOT_LOADED", "NVMLError_DriverNotLoaded: Driver Not Loaded"),
    ],
)
def test_nvml_without_library_or_driver_is_info_and_the_next_layer_answers(
    tmp_path: pathlib.Path,
    run_detect: Callable[..., Any],
    pynvml_source: Optional[pathlib.Path],
    code: str,
    error: str,
) -> None:
    gpus = nvidia.fake_gpus(2)
    nvml = emulated_pynvml(gpus, source=pynvml_source, init_error=getattr(pynvml, code))
    devices, notes = run_detect(NvidiaManager(), nvml_host(tmp_path, gpus, nvml, smi=True))
    assert [(d.id, d.source) for d in devices] == [("0", "command"), ("1", "command")]
    assert f"info: pynvml.nvmlInit() found no vendor stack: {error}" in notes
    assert "warning" not in notes
    assert nvml.calls["nvmlShutdown"] == 0


# -- AMD ---------------------------------------------------------------------------------------
def mi300x(count: int) -> list[amd.FakeAmdGpu]:
    """MI300X GPUs whose serials have hex letters, so a serial read in the wrong base shows."""
    return [
        dataclasses.replace(gpu, serial=0xA1B2_C3D4_E5F6_0000 + n)
        for n, gpu in enumerate(amd.fake_amdgpus(count))
    ]


def amd_host(tmp_path: pathlib.Path, gpus: list[amd.FakeAmdGpu], module: Any) -> accelkit.FakeHost:
    """The GPUs' KFD topology, with amdsmi the only source of PCI device id and VRAM size."""
    amd_hosts.write_sysfs(tmp_path, gpus)
    for name in ("device", "mem_info_vram_total"):
        for path in tmp_path.glob(f"sys/bus/pci/devices/*/{name}"):
            path.unlink()
    modules = {} if module is None else {"amdsmi": module}
    return accelkit.FakeHost(root=tmp_path, modules=modules)


def test_amdsmi_gives_every_fact_and_rocr_uuids(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any], amdsmi_package: pathlib.Path
) -> None:
    gpus = mi300x(8)
    smi = emulated_amdsmi(gpus, package_dir=amdsmi_package)
    devices, notes = run_detect(AmdManager(), amd_host(tmp_path, gpus, smi))
    assert [(d.id, d.index, d.source) for d in devices] == [
        (str(n), n, "library") for n in range(8)
    ]
    assert [(d.uuid, d.pci_bus_id) for d in devices] == [(g.rocr_uuid, g.bus_id) for g in gpus]
    assert {(d.type_label, d.model, d.memory_bytes) for d in devices} == {
        ("AMD-Instinct-MI300X-OAM", "AMD Instinct MI300X", 196592 * amd.MIB)
    }
    assert (smi.calls["amdsmi_init"], smi.calls["amdsmi_shut_down"]) == (1, 1)
    assert "warning" not in notes
    by_kfd, _ = run_detect(AmdManager(), amd_host(tmp_path, gpus, None))
    assert [d.uuid for d in devices] == [d.uuid for d in by_kfd]  # as ROCr names them


def test_amdsmi_handles_in_another_order_give_ids_in_kfd_order(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any], amdsmi_package: pathlib.Path
) -> None:
    gpus = mi300x(8)
    order = [5, 2, 7, 0, 3, 6, 1, 4]
    smi = emulated_amdsmi(gpus, package_dir=amdsmi_package, handle_order=order)
    devices, _ = run_detect(AmdManager(), amd_host(tmp_path, gpus, smi))
    assert [(d.id, d.pci_bus_id, d.uuid, d.source) for d in devices] == [
        (str(n), g.bus_id, g.rocr_uuid, "library") for n, g in enumerate(gpus)
    ]


def test_the_partitions_of_a_card_are_processors_of_its_one_socket(
    amdsmi_package: pathlib.Path,
) -> None:
    """libamd_smi makes a socket per card (its domain:bus:device) and a processor per partition
    (each its own KFD node), in the order it meets them; a partition's BDF has its index in the
    function bits (KFD's location_id), its VRAM is the whole card's (the card's sysfs)."""
    card, whole = amd.fake_amdgpus(2)
    gpus = [*amd.partitions_of(card, 4), whole]
    smi = emulated_amdsmi(gpus, package_dir=amdsmi_package, handle_order=[4, 0, 2, 1, 3])
    smi.amdsmi_init()
    assert len(smi.amdsmi_get_socket_handles()) == 2
    handles = smi.amdsmi_get_processor_handles()
    assert [smi.amdsmi_get_gpu_device_bdf(h) for h in handles] == [
        "0000:26:00.0",
        "0000:05:00.0",
        "0000:05:00.2",
        "0000:05:00.1",
        "0000:05:00.3",
    ]
    sizes = [smi.amdsmi_get_gpu_vram_info(h) for h in handles]
    assert {s.get("vram_size", s.get("vram_size_mb")) for s in sizes} == {196592}
    hand_written = amd.fake_amdsmi(gpus)
    hand_written.amdsmi_init()
    listed = hand_written.amdsmi_get_processor_handles()
    assert [hand_written.amdsmi_get_gpu_device_bdf(h) for h in listed] == [g.bdf for g in gpus]
    assert {hand_written.amdsmi_get_gpu_vram_info(h)["vram_size"] for h in listed} == {196592}


# -- the hand-written fakes raise what the real wrappers raise ---------------------------------
def test_amdsmi_without_its_driver_is_info_and_the_next_layer_answers(
    tmp_path: pathlib.Path, run_detect: Callable[..., Any], amdsmi_package: pathlib.Path
) -> None:
    """amdsmi_init answers AMDSMI_STATUS_DRIVER_NOT_LOADED (34) when amdgpu is not loaded; the
    wrapper raises its one exception class for every status, so the status names the cause."""
    gpus = mi300x(2)
    smi = emulated_amdsmi(gpus, package_dir=amdsmi_package, init_error=34)
    amd_hosts.write_sysfs(tmp_path, gpus)
    devices, notes = run_detect(
        AmdManager(), accelkit.FakeHost(root=tmp_path, modules={"amdsmi": smi})
    )
    assert [(d.id, d.source) for d in devices] == [("0", "sysfs"), ("1", "sysfs")]
    assert "info: amdsmi.amdsmi_init() found no vendor stack: AmdSmiLibraryException" in notes
    assert "warning" not in notes


def raised(call: Callable[[], object]) -> BaseException:
    """The exception ``call`` raises (failing the test when it raises none)."""
    try:
        call()
    except Exception as exc:
        return exc
    pytest.fail(f"{call} raised nothing")


def nvml_gpu(nvml: Any, index: int) -> Any:
    """The handle of GPU ``index`` in a fresh NVML session."""
    nvml.nvmlInit()
    return nvml.nvmlDeviceGetHandleByIndex(index)


NVML_FAILURES: dict[str, Callable[[Any], object]] = {
    "a call before nvmlInit": lambda nvml: nvml.nvmlDeviceGetCount(),
    "nvmlShutdown without nvmlInit": lambda nvml: nvml.nvmlShutdown(),
    "MIG mode of a GPU without MIG": lambda nvml: nvml.nvmlDeviceGetMigMode(nvml_gpu(nvml, 1)),
    "an empty MIG slot": lambda nvml: nvml.nvmlDeviceGetMigDeviceHandleByIndex(
        nvml_gpu(nvml, 0), 2
    ),
    "the own memory of a GPU in MIG mode": lambda nvml: nvml.nvmlDeviceGetMemoryInfo(
        nvml_gpu(nvml, 0)
    ),
    "a GPU this process may not open": lambda nvml: nvml_gpu(nvml, 2),
    "GPU index -1": lambda nvml: nvml_gpu(nvml, -1),
    "a GPU index past the last GPU": lambda nvml: nvml_gpu(nvml, 3),
}


@pytest.mark.parametrize("case", NVML_FAILURES)
def test_the_hand_written_pynvml_raises_what_the_real_one_raises(case: str) -> None:
    gpus = nvidia.fake_gpus(3)
    gpus[0] = dataclasses.replace(gpus[0], migs=A100_MIGS, mig_mode=1)
    gpus[1] = dataclasses.replace(gpus[1], migs=None)  # MIG not supported
    gpus[2] = dataclasses.replace(gpus[2], accessible=False)
    fake = raised(lambda: NVML_FAILURES[case](nvidia.fake_pynvml(gpus)))
    real = raised(lambda: NVML_FAILURES[case](emulated_pynvml(gpus)))
    assert [c.__name__ for c in type(fake).__mro__] == [c.__name__ for c in type(real).__mro__]
    assert str(fake) == str(real)


@pytest.mark.parametrize("hand_written", [False, True], ids=["emulated", "hand-written"])
def test_nvml_mig_queries_answer_as_nvml_h_documents(hand_written: bool) -> None:
    """nvml.h: nvmlDeviceGetMaxMigDeviceCount "Returns zero if MIG is not supported or enabled"
    (it lists no NOT_SUPPORTED); nvmlDeviceGetMigDeviceHandleByIndex answers NOT_SUPPORTED "if
    this query is not supported by the device", NOT_FOUND "if no valid MIG device was found at
    index", INVALID_ARGUMENT "if device, index or migDevice reference is invalid"."""
    gpus = nvidia.fake_gpus(3, name="NVIDIA A100-SXM4-40GB")
    gpus[0] = dataclasses.replace(gpus[0], migs=None)  # MIG not supported
    gpus[1] = dataclasses.replace(gpus[1], migs=(), mig_mode=0)  # MIG-capable, MIG off
    gpus[2] = dataclasses.replace(gpus[2], migs=A100_MIGS, mig_mode=1)
    nvml = nvidia.fake_pynvml(gpus) if hand_written else emulated_pynvml(gpus)
    nvml.nvmlInit()
    no_mig, mig_off, mig_on = (nvml.nvmlDeviceGetHandleByIndex(n) for n in range(3))
    instance = nvml.nvmlDeviceGetMigDeviceHandleByIndex(mig_on, 0)
    handles = (no_mig, mig_off, instance, mig_on)
    assert [nvml.nvmlDeviceGetMaxMigDeviceCount(h) for h in handles] == [0, 0, 0, 7]

    def refusal(handle: object, index: int) -> str:
        error = raised(lambda: nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, index))
        return type(error).__name__

    assert [refusal(h, 0) for h in handles[:3]] == ["NVMLError_NotSupported"] * 3
    assert refusal(mig_on, 2) == "NVMLError_NotFound"  # an empty slot
    assert [refusal(mig_on, n) for n in (7, -1)] == ["NVMLError_InvalidArgument"] * 2


@pytest.mark.parametrize("hand_written", [False, True], ids=["emulated", "hand-written"])
def test_nvml_counts_its_inits_and_closes_at_the_last_shutdown(hand_written: bool) -> None:
    """nvml.h, nvmlShutdown: "A reference count of the number of initializations is maintained.
    Shutdown only occurs when the reference count reaches zero" (a monitor's NVML session
    survives detection's own)."""
    gpus = nvidia.fake_gpus(2)
    nvml = nvidia.fake_pynvml(gpus) if hand_written else emulated_pynvml(gpus)
    nvml.nvmlInit()  # a monitor's session, distributed's NVML diagnostics say
    nvml.nvmlInit()
    nvml.nvmlShutdown()
    assert nvml.nvmlDeviceGetCount() == 2
    nvml.nvmlShutdown()
    assert type(raised(nvml.nvmlDeviceGetCount)).__name__ == "NVMLError_Uninitialized"
    assert type(raised(nvml.nvmlShutdown)).__name__ == "NVMLError_Uninitialized"


def test_every_nvml_error_of_the_hand_written_pynvml_is_a_real_one() -> None:
    fake, real = nvidia.fake_pynvml([]), emulated_pynvml([])
    names = sorted(name for name in vars(fake) if name.startswith("NVMLError_"))
    assert {"NVMLError_DriverNotLoaded", "NVMLError_LibraryNotFound"} <= set(names)
    for name in names:
        assert issubclass(getattr(real, name), real.NVMLError)
        assert str(getattr(fake, name)()) == str(getattr(real, name)())


def test_the_hand_written_amdsmi_raises_what_the_real_one_raises(amdsmi_dir: pathlib.Path) -> None:
    gpus = amd.fake_amdgpus(1)
    fake = raised(amd.fake_amdsmi(gpus).amdsmi_get_processor_handles)
    real = raised(emulated_amdsmi(gpus, package_dir=amdsmi_dir).amdsmi_get_processor_handles)
    assert [c.__name__ for c in type(fake).__mro__] == [c.__name__ for c in type(real).__mro__]
    assert (str(fake), fake.err_code) == (str(real), real.err_code)  # type: ignore[attr-defined]


def test_amdsmi_shut_down_without_a_session_succeeds(amdsmi_package: pathlib.Path) -> None:
    """libamd_smi's amdsmi_shut_down() answers AMDSMI_STATUS_SUCCESS when no session is open
    (amd_smi.cc: ``if (!initialized_lib) return AMDSMI_STATUS_SUCCESS;``), and amdsmi_init is
    not counted: one shut_down after two inits closes the session. The hand-written fake too."""
    gpus = amd.fake_amdgpus(1)
    for smi in (emulated_amdsmi(gpus, package_dir=amdsmi_package), amd.fake_amdsmi(gpus)):
        assert smi.amdsmi_shut_down() is None
        smi.amdsmi_init()
        smi.amdsmi_init()
        smi.amdsmi_shut_down()
        error = raised(smi.amdsmi_get_processor_handles)
        assert error.err_code == 32  # type: ignore[attr-defined]  # AMDSMI_STATUS_NOT_INIT


# -- the emulators themselves -------------------------------------------------------------------
def test_emulated_wrappers_are_fresh_copies_that_leave_sys_modules_alone(
    amdsmi_dir: pathlib.Path,
) -> None:
    before = dict(sys.modules)
    first, second = emulated_pynvml([]), emulated_pynvml([])
    smi = emulated_amdsmi([], package_dir=amdsmi_dir)
    assert first is not second and first.NVMLError is not second.NVMLError
    assert "pynvml" not in sys.modules or sys.modules["pynvml"] not in (first, second)
    assert smi.__name__ not in sys.modules
    assert dict(sys.modules) == before


def test_an_unknown_nvml_function_is_not_found_and_amdsmi_names_what_is_not_emulated(
    amdsmi_dir: pathlib.Path,
) -> None:
    nvml = emulated_pynvml(nvidia.fake_gpus(1))
    error = raised(lambda: nvml.nvmlDeviceGetPowerUsage(nvml_gpu(nvml, 0)))
    assert type(error).__name__ == "NVMLError_FunctionNotFound"
    smi = emulated_amdsmi(amd.fake_amdgpus(1), package_dir=amdsmi_dir)
    smi.amdsmi_init()
    handle = smi.amdsmi_get_processor_handles()[0]
    with pytest.raises(NotImplementedError, match=r"amdsmi_get_gpu_device_uuid\(\) is not"):
        smi.amdsmi_get_gpu_device_uuid(handle)


def test_nvml_utilization_is_an_idle_gpu_and_not_supported_in_mig_mode() -> None:
    """What distributed's diagnostics ask every Dask worker's GPU (the simulated machine's
    workers ask it too: tests/test_any_machine.py)."""
    gpus = nvidia.fake_gpus(3, name="NVIDIA A100-SXM4-40GB")
    gpus[1] = dataclasses.replace(gpus[1], migs=A100_MIGS, mig_mode=1)
    gpus[2] = dataclasses.replace(gpus[2], migs=(), mig_mode=0)  # MIG-capable, MIG off
    nvml = emulated_pynvml(gpus)
    nvml.nvmlInit()
    for whole in (0, 2):
        rates = nvml.nvmlDeviceGetUtilizationRates(nvml.nvmlDeviceGetHandleByIndex(whole))
        assert (rates.gpu, rates.memory) == (0, 0)
    in_mig_mode = nvml.nvmlDeviceGetHandleByIndex(1)
    instance = nvml.nvmlDeviceGetMigDeviceHandleByIndex(in_mig_mode, 0)
    for handle in (in_mig_mode, instance):
        error = raised(lambda: nvml.nvmlDeviceGetUtilizationRates(handle))  # noqa: B023
        assert type(error).__name__ == "NVMLError_NotSupported"
    assert nvml.calls["nvmlDeviceGetUtilizationRates"] == 4


def test_nvml_answers_a_mig_gpus_own_memory_only_with_the_mig_monitor_capability() -> None:
    """nvml.h, nvmlDeviceGetMemoryInfo: "In MIG mode, if device handle is provided, the API
    returns aggregate information, only if the caller has appropriate privileges"."""
    gpus = nvidia.fake_gpus(2, name="NVIDIA A100-SXM4-40GB")
    gpus[0] = dataclasses.replace(gpus[0], migs=A100_MIGS, mig_mode=1)
    for mig_monitor in (False, True):
        nvml = emulated_pynvml(gpus, mig_monitor=mig_monitor)
        in_mig_mode = nvml_gpu(nvml, 0)
        instance = nvml.nvmlDeviceGetMigDeviceHandleByIndex(in_mig_mode, 0)
        whole = nvml.nvmlDeviceGetHandleByIndex(1)
        assert nvml.nvmlDeviceGetMemoryInfo(instance).total == A100_MIGS[0].memory_bytes
        assert nvml.nvmlDeviceGetMemoryInfo(whole).total == gpus[1].memory_bytes
        if mig_monitor:
            assert nvml.nvmlDeviceGetMemoryInfo(in_mig_mode).total == gpus[0].memory_bytes
        else:
            error = raised(lambda: nvml.nvmlDeviceGetMemoryInfo(in_mig_mode))  # noqa: B023
            assert type(error).__name__ == "NVMLError_NoPermission"


def test_a_handle_order_that_is_not_a_permutation_is_refused(amdsmi_dir: pathlib.Path) -> None:
    with pytest.raises(ValueError, match=r"handle_order \[0, 0\] is not an ordering of the 2"):
        emulated_amdsmi(amd.fake_amdgpus(2), handle_order=[0, 0], package_dir=amdsmi_dir)
