"""A vendor whose runtime reads CUDA's or HIP's variable (MetaX, Hygon DCU) claims it through its
plugin: NVIDIA and AMD then make no devices from it, and a node with both is an error."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Optional

import accelkit
import pytest
from accelkit import AcceleratorManager, Device, Host, hookimpl, registry
from accelkit.errors import ConfigurationError
from accelkit.testing.fakes.nvidia import fake_gpus
from accelkit_plugins.nvidia import testing as nvidia_hosts


class MetaxManager(AcceleratorManager):
    """A third party's GPUs whose runtime reads ``CUDA_VISIBLE_DEVICES`` (as MetaX's does)."""

    name = "metax"
    resource_name = "GPU"
    api_version = 2
    visible_devices_env_var = "CUDA_VISIBLE_DEVICES"

    def detect(self, host: Host) -> list[Device]:
        return [Device(str(n), type_label="MXC500") for n in range(len(host.glob("/dev/mxcd*")))]


class HygonManager(AcceleratorManager):
    """A third party's DCUs whose runtime reads ``HIP_VISIBLE_DEVICES`` (as Hygon's does)."""

    name = "hygon"
    resource_name = "DCU"
    api_version = 2
    visible_devices_env_var = "HIP_VISIBLE_DEVICES"

    def detect(self, host: Host) -> list[Device]:
        return [Device(str(n), type_label="K100") for n in range(len(host.glob("/dev/kfd-dcu*")))]


class ThirdParty:
    """The plugin: one manager, registered as any installed plugin registers its own."""

    def __init__(self, manager: AcceleratorManager) -> None:
        self.manager = manager
        self.__name__ = f"accelkit-{manager.name}"

    @hookimpl
    def accelkit_register_managers(self) -> list[AcceleratorManager]:
        return [self.manager]


def plugins_with(manager: AcceleratorManager) -> registry.Registry:
    """The seven built-ins and the third party beside them (after them, as entry points are)."""
    builtins = [importlib.import_module(name) for name in registry.BUILTIN_PLUGINS]
    return registry.Registry([*builtins, ThirdParty(manager)], autoload=False)


def host(
    root: Path,
    *,
    files: tuple[str, ...] = (),
    nvidia: int = 0,
    env: Optional[dict[str, str]] = None,
) -> accelkit.FakeHost:
    """A machine with the third party's device files and ``nvidia`` NVIDIA GPUs (nvidia-smi)."""
    for name in files:
        (root / "dev").mkdir(parents=True, exist_ok=True)
        (root / "dev" / name).touch()
    gpus = fake_gpus(nvidia)
    nvidia_hosts.write_sysfs(root, gpus)
    commands = (
        {nvidia_hosts.NVIDIA_SMI_ARGV: (0, nvidia_hosts.nvidia_smi_output(gpus))} if nvidia else {}
    )
    return accelkit.FakeHost(root=root, env=env, commands=commands)


@pytest.mark.parametrize(
    ("manager", "files", "variable", "stand_in"),
    [
        (MetaxManager(), ("mxcd0", "mxcd1"), "CUDA_VISIBLE_DEVICES", "nvidia"),
        (HygonManager(), ("kfd-dcu0", "kfd-dcu1"), "HIP_VISIBLE_DEVICES", "amd"),
    ],
)
def test_a_claimed_variable_makes_no_stand_in_devices(
    tmp_path: Path,
    manager: AcceleratorManager,
    files: tuple[str, ...],
    variable: str,
    stand_in: str,
) -> None:
    node = accelkit.detect_node(
        host(tmp_path, files=files, env={variable: "0,1"}), registry=plugins_with(manager)
    )
    assert [(d.family, d.id) for d in node.devices] == [(manager.name, "0"), (manager.name, "1")]
    assert node.resources[manager.resource_name] == 2.0
    assert "GPU" not in node.resources or manager.resource_name == "GPU"
    infos = [d.message for d in node.diagnostics if d.family == stand_in]
    claimed = f"{variable} is claimed by the {manager.name} family, whose devices are detected"
    assert f"{claimed}: no {stand_in} devices are made from it" in infos


def test_without_the_claimants_devices_the_variable_still_names_logical_gpus(
    tmp_path: Path,
) -> None:
    node = accelkit.detect_node(
        host(tmp_path, env={"CUDA_VISIBLE_DEVICES": "0,1"}), registry=plugins_with(MetaxManager())
    )
    assert [(d.family, d.id, d.source) for d in node.devices] == [
        ("nvidia", "0", "env"),
        ("nvidia", "1", "env"),
    ]


def test_without_devices_a_variable_of_two_resources_names_logical_devices_of_one(
    tmp_path: Path,
) -> None:
    # A DCU family reading CUDA_VISIBLE_DEVICES, nothing detected: NVIDIA (first in registry
    # order) makes the logical devices. Both did, and a GPU grant then wrote no
    # CUDA_VISIBLE_DEVICES at all (it is the DCU family's variable too): the worker saw every
    # device while the grant named one.
    dcu = HygonManager()
    dcu.visible_devices_env_var = "CUDA_VISIBLE_DEVICES"
    plugins = plugins_with(dcu)
    node = accelkit.detect_node(
        host(tmp_path, env={"CUDA_VISIBLE_DEVICES": "0,1"}), registry=plugins
    )
    assert [(d.family, d.id) for d in node.devices] == [("nvidia", "0"), ("nvidia", "1")]
    assert "DCU" not in node.resources
    infos = [d.message for d in node.diagnostics if d.family == "hygon"]
    assert any("another family's devices are named by CUDA_VISIBLE_DEVICES" in i for i in infos)
    grant = accelkit.Allocator(node, registry=plugins).acquire({"GPU": 1})
    assert grant.env({}, hooks=False, registry=plugins)["CUDA_VISIBLE_DEVICES"] == "0"


def test_a_grant_whose_variable_another_node_family_reads_is_refused() -> None:
    # Only a node built by hand can hold both (detection refuses it): its grant cannot be
    # written, and said nothing (its environment left every device visible).
    dcu = HygonManager()
    dcu.visible_devices_env_var = "CUDA_VISIBLE_DEVICES"
    plugins = plugins_with(dcu)
    node = accelkit.Node(
        devices=[
            Device("0", family="nvidia", resource_name="GPU"),
            Device("0", family="hygon", resource_name="DCU"),
        ],
        resources={"GPU": 1.0, "DCU": 1.0},
    )
    grant = accelkit.Allocator(node, registry=plugins).acquire({"GPU": 1})
    with pytest.raises(ConfigurationError, match="which another family of the node reads too"):
        grant.env({}, hooks=False, registry=plugins)


def test_nvidia_and_a_claimant_with_devices_on_one_node_is_an_error_naming_both(
    tmp_path: Path,
) -> None:
    machine = host(tmp_path, files=("mxcd0",), nvidia=2)
    with pytest.raises(ConfigurationError) as raised:
        accelkit.detect_node(machine, registry=plugins_with(MetaxManager()))
    message = str(raised.value)
    assert message.startswith("CUDA_VISIBLE_DEVICES is claimed by nvidia (2 device(s), ")
    assert "and by metax (1 device(s), " in message
    assert "ACCELKIT_DISABLE_PLUGINS=accelkit-metax" in message


def test_excluding_one_familys_devices_resolves_the_clash(tmp_path: Path) -> None:
    env = {"ACCELKIT_EXCLUDE_DEVICES": "nvidia:0,nvidia:1"}
    machine = host(tmp_path, files=("mxcd0",), nvidia=2, env=env)
    node = accelkit.detect_node(machine, registry=plugins_with(MetaxManager()))
    assert [(d.family, d.id) for d in node.devices] == [("metax", "0")]


def test_amd_and_nvidia_share_no_primary_variable(tmp_path: Path) -> None:
    # AMD reads CUDA_VISIBLE_DEVICES as HIP's fallback, but claims only ROCR_VISIBLE_DEVICES.
    node = accelkit.detect_node(host(tmp_path, nvidia=1), registry=plugins_with(HygonManager()))
    assert [d.family for d in node.devices] == ["nvidia"]


@pytest.mark.parametrize(
    ("value", "nvidia_says"),
    [
        ("0,0", "error"),  # CUDA refuses it: nothing visible
        ("abc,0", None),  # CUDA stops at 'abc': nothing visible, as intended or not
        ("-1", None),
    ],
)
def test_a_variable_the_first_reader_finds_nothing_in_is_no_other_familys_to_make(
    tmp_path: Path, value: str, nvidia_says: Optional[str]
) -> None:
    """Nothing detected: NVIDIA, first in registry order, reads ``CUDA_VISIBLE_DEVICES`` and
    finds no GPU visible in it. AMD (HIP reads the variable when its own are unset) and a MetaX
    plugin read it otherwise (``0,0`` as GPU 0; ``abc`` as a device named ``abc``) and made
    logical GPUs of it, which no CUDA or HIP process would see."""
    node = accelkit.detect_node(
        host(tmp_path, env={"CUDA_VISIBLE_DEVICES": value}), registry=plugins_with(MetaxManager())
    )
    assert node.devices == []
    assert "GPU" not in node.resources
    errors = [d.message for d in node.diagnostics if d.level == "error"]
    assert [m.startswith("cannot read CUDA_VISIBLE_DEVICES") for m in errors] == (
        [True] if nvidia_says == "error" else []
    )
    for family in ("amd", "metax") if value == "0,0" else ("metax",):  # HIP stops at abc, -1
        notes = [d.message for d in node.diagnostics if d.family == family]
        assert (
            f"CUDA_VISIBLE_DEVICES={value!r} is set but no {family} device was detected, and "
            "CUDA_VISIBLE_DEVICES was read first by the nvidia family, for which it makes nothing "
            "visible: creating no devices from it"
        ) in notes, notes


def test_a_family_s_own_variable_still_names_its_logical_devices(tmp_path: Path) -> None:
    """HIP reads ``CUDA_VISIBLE_DEVICES`` only where ``HIP_VISIBLE_DEVICES`` is unset: a HIP list
    beside a CUDA one NVIDIA finds nothing in (a shell hiding NVIDIA GPUs) is AMD's."""
    for env in (
        {"HIP_VISIBLE_DEVICES": "1"},
        {"HIP_VISIBLE_DEVICES": "1", "CUDA_VISIBLE_DEVICES": ""},
    ):
        node = accelkit.detect_node(host(tmp_path, env=env), registry=plugins_with(MetaxManager()))
        assert [(d.family, d.id, d.source) for d in node.devices] == [("amd", "1", "env")]


def test_a_variable_is_claimed_only_by_the_family_whose_reading_comes_from_it(
    tmp_path: Path,
) -> None:
    """``ROCR_VISIBLE_DEVICES=""`` makes AMD's reading empty; ``HIP_VISIBLE_DEVICES``, which AMD
    reads too, is still a DCU family's own to name logical devices with (the re-review found it
    claimed by AMD's empty reading)."""
    env = {"ROCR_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": "0,1"}
    node = accelkit.detect_node(host(tmp_path, env=env), registry=plugins_with(HygonManager()))
    assert [(d.family, d.id, d.source) for d in node.devices] == [
        ("hygon", "0", "env"),
        ("hygon", "1", "env"),
    ]


class FallbackDcuManager(HygonManager):
    """DCUs whose runtime reads ``HIP_VISIBLE_DEVICES``, else ``CUDA_VISIBLE_DEVICES``."""

    env_vars_read = ("HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")

    def read_visible(self, env: Mapping[str, str]) -> Optional[list[str]]:
        value = env.get("HIP_VISIBLE_DEVICES") or env.get("CUDA_VISIBLE_DEVICES")
        return None if value is None else value.split(",")


def test_a_variable_naming_one_familys_logical_devices_names_no_other_familys(
    tmp_path: Path,
) -> None:
    node = accelkit.detect_node(
        host(tmp_path, env={"CUDA_VISIBLE_DEVICES": "0,1"}),
        registry=plugins_with(FallbackDcuManager()),
    )
    assert [(d.family, d.id) for d in node.devices] == [("nvidia", "0"), ("nvidia", "1")]
    notes = [d.message for d in node.diagnostics if d.family == "hygon"]
    assert (
        "CUDA_VISIBLE_DEVICES='0,1' is set but no hygon device was detected, and "
        "CUDA_VISIBLE_DEVICES was read first by the nvidia family, whose logical devices it "
        "names: creating no devices from it"
    ) in notes, notes
