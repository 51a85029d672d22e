"""Grant: ids, devices with shares, the worker env, memory hints and the JSON round trip."""

from __future__ import annotations

import importlib
import json
import pickle
from typing import Optional

import pytest
from accelkit import (
    AcceleratorManager,
    Allocator,
    Device,
    Grant,
    PluginError,
    get_manager,
    hookimpl,
    registry,
)
from accelkit.schedule._grant import devices_text, grant_text, shared_resources
from accelkit_plugins import hints
from sched_nodes import devices, make_node

NO_ENV: dict[str, str] = {}


def builtin_modules() -> list[object]:
    """The built-in plugin modules, to build a registry with one more plugin beside them."""
    return [importlib.import_module(name) for name in registry.BUILTIN_PLUGINS]


def grant_of(request: dict[str, object], *groups: list, **kwargs: str) -> Grant:
    alloc = Allocator(make_node(*groups))
    grant = alloc.acquire(request, **kwargs)
    assert grant is not None
    return grant


def test_ids_by_resource_and_devices_with_shares() -> None:
    grant = grant_of({"GPU": 0.5, "TPU": 2}, devices("nvidia", 2), devices("tpu", 4))
    assert grant.ids == {"GPU": ["0"], "TPU": ["0", "1"]}
    assert [(d.family, d.id, share) for d, share in grant.devices] == [
        ("nvidia", "0", 0.5),
        ("tpu", "0", 1.0),
        ("tpu", "1", 1.0),
    ]
    assert grant.ids_by_family() == {"nvidia": ["0"], "tpu": ["0", "1"]}
    assert dict(grant.resources) == {"GPU": 0.5, "TPU": 2.0}


def test_grants_are_immutable_and_pickle_by_value() -> None:
    grant = grant_of({"GPU": 1}, devices("nvidia", 1))
    with pytest.raises(AttributeError):
        grant.token = 3  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del grant.devices
    assert pickle.loads(pickle.dumps(grant)) == grant
    with pytest.raises(TypeError):
        grant.resources["GPU"] = 2.0  # type: ignore[index]


def test_env_is_each_granted_familys_visibility_env() -> None:
    grant = grant_of({"GPU": 2, "TPU": 1}, devices("nvidia", 2), devices("tpu", 4))
    env = grant.env(NO_ENV, hooks=False)
    expected = {
        **get_manager("nvidia").visibility_env(["0", "1"]),
        **get_manager("tpu").visibility_env(["0"]),
    }
    assert env == expected
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert env["TPU_VISIBLE_CHIPS"] == "0"


@pytest.mark.parametrize(
    ("family", "written", "neutralised"),
    [
        (
            "amd",
            {"ROCR_VISIBLE_DEVICES": "0", "HIP_VISIBLE_DEVICES": "0"},
            ["CUDA_VISIBLE_DEVICES"],
        ),
        (
            "intel",
            {"ONEAPI_DEVICE_SELECTOR": "level_zero:0", "ZE_ENABLE_PCI_ID_DEVICE_ORDER": "1"},
            ["ZE_AFFINITY_MASK"],
        ),
    ],
)
def test_stacked_layers_are_neutralised(
    family: str, written: dict[str, str], neutralised: list[str]
) -> None:
    env = grant_of({"GPU": 1}, devices(family, 2)).env(NO_ENV, hooks=False)
    assert env == {**written, **dict.fromkeys(neutralised)}


def test_untouched_families_are_left_alone_unless_hidden() -> None:
    node_groups = (devices("nvidia", 2), devices("ascend", 2), devices("tpu", 4))
    grant = grant_of({"NPU": 0.25}, *node_groups)
    assert grant.families == ("nvidia", "ascend", "tpu")
    env = grant.env(NO_ENV, hooks=False)
    assert env == {"ASCEND_RT_VISIBLE_DEVICES": "0"}
    hidden = grant.env(NO_ENV, hide_others=True, hooks=False)
    assert hidden == {
        **get_manager("nvidia").visibility_env([]),
        **get_manager("tpu").visibility_env([]),
        "ASCEND_RT_VISIBLE_DEVICES": "0",
    }
    assert hidden["CUDA_VISIBLE_DEVICES"] == ""


def test_hide_others_may_name_the_families_to_hide() -> None:
    node_groups = (devices("nvidia", 2), devices("ascend", 2), devices("tpu", 4))
    grant = grant_of({"NPU": 1}, *node_groups)
    env = grant.env(NO_ENV, hide_others=frozenset({"nvidia", "amd"}), hooks=False)
    # nvidia hidden, tpu left as inherited, a named family the node lacks ignored
    assert env == {**get_manager("nvidia").visibility_env([]), "ASCEND_RT_VISIBLE_DEVICES": "0"}
    # naming a granted family does not hide its grant
    assert grant.env(NO_ENV, hide_others=["ascend"], hooks=False) == {
        "ASCEND_RT_VISIBLE_DEVICES": "0"
    }
    with pytest.raises(TypeError, match=r"not the string 'nvidia': write \['nvidia'\]"):
        grant.env(NO_ENV, hide_others="nvidia", hooks=False)  # type: ignore[arg-type]
    # anything else by its truth, as before collections were taken (None, numpy.bool_)
    unhidden = grant.env(NO_ENV, hooks=False)
    assert grant.env(NO_ENV, hide_others=None, hooks=False) == unhidden  # type: ignore[arg-type]
    every = grant.env(NO_ENV, hide_others=True, hooks=False)
    assert grant.env(NO_ENV, hide_others=1, hooks=False) == every != unhidden  # type: ignore[arg-type]


def test_a_family_name_no_one_knows_is_refused_not_ignored() -> None:
    """``{"acsend"}`` hid nothing, silently: the worker saw every NPU. A family some plugin
    provides but the node lacks ("amd" above) still hides nothing, for one list per cluster."""
    grant = grant_of({"GPU": 1}, devices("nvidia", 2), devices("ascend", 2))
    with pytest.raises(ValueError, match=r"^hide_others names 'acsend', no family this node or"):
        grant.env(NO_ENV, hide_others={"acsend", "nvidia"}, hooks=False)


def test_a_string_hide_others_is_refused_on_a_node_of_one_family_too() -> None:
    # with nothing to hide, a string used to pass: code passing its tests on a one-family node
    # then failed on a mixed one
    grant = grant_of({"GPU": 1}, devices("nvidia", 2))
    with pytest.raises(TypeError, match=r"not the string 'amd': write \['amd'\]"):
        grant.env(NO_ENV, hide_others="amd", hooks=False)  # type: ignore[arg-type]


def test_hiding_a_family_whose_plugin_is_not_loaded_says_so() -> None:
    grant = grant_of({"NPU": 1}, devices("nvidia", 2), devices("ascend", 2))
    plugins = registry.Registry(
        [m for m in builtin_modules() if not m.__name__.endswith("nvidia")], autoload=False
    )
    assert grant.env(NO_ENV, hooks=False, registry=plugins) == {"ASCEND_RT_VISIBLE_DEVICES": "0"}
    with pytest.raises(PluginError, match=r"^hiding the node's nvidia devices from the worker"):
        grant.env(NO_ENV, hide_others=True, hooks=False, registry=plugins)


def test_a_granted_family_wins_over_a_hidden_one_sharing_a_variable() -> None:
    grant = grant_of({"GPU": 1}, devices("nvidia", 1), devices("amd", 1))
    env = grant.env(NO_ENV, hide_others=True, hooks=False)
    assert env["CUDA_VISIBLE_DEVICES"] == "0"  # whatever AMD's hiding does to CUDA's variable
    assert env["ROCR_VISIBLE_DEVICES"] == ""


def test_a_family_never_writes_another_node_familys_variable() -> None:
    # AMD's rule unsets CUDA_VISIBLE_DEVICES (HIP reads it relative to ROCr): on a node with
    # NVIDIA GPUs too, that would show the worker every NVIDIA GPU, hidden or not.
    node_groups = (devices("nvidia", 1), devices("amd", 1))
    alloc = Allocator(make_node(*node_groups))
    assert take_gpu(alloc).ids_by_family() == {"nvidia": ["0"]}
    amd = take_gpu(alloc)
    hidden = amd.env(NO_ENV, hide_others=True, hooks=False)
    assert hidden["CUDA_VISIBLE_DEVICES"] == ""  # NVIDIA's own hiding stands
    assert (hidden["ROCR_VISIBLE_DEVICES"], hidden["HIP_VISIBLE_DEVICES"]) == ("0", "0")
    inherited = amd.env({"CUDA_VISIBLE_DEVICES": "0"}, hooks=False)
    assert "CUDA_VISIBLE_DEVICES" not in inherited  # left as inherited, never unset by AMD
    alone = Allocator(make_node(devices("amd", 1)))
    assert take_gpu(alone).env(NO_ENV, hooks=False)["CUDA_VISIBLE_DEVICES"] is None


def take_gpu(alloc: Allocator) -> Grant:
    grant = alloc.acquire({"GPU": 1})
    assert grant is not None
    return grant


@pytest.mark.parametrize("value", ["1", "true", " yes ", "ON"])
def test_noset_leaves_a_family_alone(value: str) -> None:
    grant = grant_of({"GPU": 1, "TPU": 1}, devices("nvidia", 1), devices("tpu", 4))
    env = grant.env({"ACCELKIT_NOSET_NVIDIA": value}, hooks=False)
    assert "CUDA_VISIBLE_DEVICES" not in env and "CUDA_DEVICE_ORDER" not in env
    assert env["TPU_VISIBLE_CHIPS"] == "0"
    hidden = grant.env({"ACCELKIT_NOSET_NVIDIA": "0", "ACCELKIT_NOSET_TPU": "1"}, hooks=False)
    assert "TPU_VISIBLE_CHIPS" not in hidden and hidden["CUDA_VISIBLE_DEVICES"] == "0"


def test_noset_defaults_to_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    grant = grant_of({"GPU": 1}, devices("nvidia", 1))
    monkeypatch.setenv("ACCELKIT_NOSET_NVIDIA", "1")
    assert grant.env(hooks=False) == {}


def test_memory_hints_for_fractional_shares_only() -> None:
    shared = grant_of({"GPU": 0.25}, devices("nvidia", 1))
    env = shared.env(NO_ENV)
    assert env["XLA_PYTHON_CLIENT_MEM_FRACTION"] == "0.25"
    assert env["TF_FORCE_GPU_ALLOW_GROWTH"] == "true"
    assert env["CUDA_VISIBLE_DEVICES"] == "0"
    whole = grant_of({"GPU": 1}, devices("nvidia", 1))
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION" not in whole.env(NO_ENV)
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION" not in shared.env(NO_ENV, hooks=False)


def test_memory_hints_are_advisory() -> None:
    shared = grant_of({"GPU": 1 / 3}, devices("nvidia", 1))
    assert shared.env(NO_ENV)["XLA_PYTHON_CLIENT_MEM_FRACTION"] == "0.3333"
    mine = shared.env({"XLA_PYTHON_CLIENT_MEM_FRACTION": ".9"})
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION" not in mine  # the user's own setting is kept
    managers = {"nvidia": get_manager("nvidia")}
    assert hints.accelkit_worker_env(shared, {}, managers) == {
        "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.3333",
        "TF_FORCE_GPU_ALLOW_GROWTH": "true",
    }


class MluManager(AcceleratorManager):
    """A third-party family whose frameworks read no JAX or TensorFlow variable."""

    name = "mlu"
    resource_name = "MLU"
    visible_devices_env_var = "MLU_VISIBLE_DEVICES"

    def detect(self, host: object) -> list[Device]:
        return []


class MluPlugin:
    @hookimpl
    def accelkit_register_managers(self) -> list[AcceleratorManager]:
        return [MluManager()]


@pytest.mark.parametrize("family", ["ascend", "intel", "mlu"])
def test_memory_hints_only_for_families_whose_frameworks_read_them(family: str) -> None:
    plugins = registry.Registry([*builtin_modules(), MluPlugin()], autoload=False)
    manager = plugins.get_manager(family)
    assert not manager.frameworks.memory_hints
    group = [Device("0", 0, family=family, resource_name=manager.resource_name)]
    shared = Allocator(make_node(group), registry=plugins).acquire({manager.resource_name: 0.5})
    assert shared is not None
    env = shared.env(NO_ENV, registry=plugins)
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION" not in env
    assert "TF_FORCE_GPU_ALLOW_GROWTH" not in env
    assert env[manager.visible_devices_env_var or ""].endswith("0")


def test_memory_hints_follow_the_hinted_family_in_a_mixed_grant() -> None:
    assert (
        get_manager("nvidia").frameworks.memory_hints and get_manager("amd").frameworks.memory_hints
    )
    mixed = grant_of({"GPU": 0.5, "NPU": 0.25}, devices("nvidia", 1), devices("ascend", 1))
    assert mixed.env(NO_ENV)["XLA_PYTHON_CLIENT_MEM_FRACTION"] == "0.5"  # not Ascend's 0.25


def test_hints_plugin_can_be_disabled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(registry.DISABLE_VAR, "hints")
    registry.reset()
    shared = grant_of({"GPU": 0.5}, devices("nvidia", 1))
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION" not in shared.env(NO_ENV)


def test_no_whitespace_is_ever_written(monkeypatch: pytest.MonkeyPatch) -> None:
    grant = grant_of({"GPU": 1}, devices("nvidia", 1))
    manager = get_manager("nvidia")

    def sloppy(ids: object, *, total: Optional[int] = None) -> dict[str, Optional[str]]:
        return {"CUDA_VISIBLE_DEVICES": "0, 1"}

    monkeypatch.setattr(manager, "visibility_env", sloppy)
    with pytest.raises(PluginError, match=r"nvidia plugin's visibility_env.*whitespace"):
        grant.env(NO_ENV)


def test_a_hook_value_with_whitespace_is_left_out() -> None:
    shared = grant_of({"GPU": 0.5}, devices("nvidia", 1))

    class Sloppy:
        @hookimpl
        def accelkit_worker_env(self, grant: Grant, env: object) -> dict[str, str]:
            return {"GOOD": "x", "BAD": "a b"}

    plugins = registry.Registry([*builtin_modules(), Sloppy()], autoload=False)
    with pytest.warns(registry.PluginWarning, match="BAD"):
        env = shared.env(NO_ENV, registry=plugins)
    assert env["GOOD"] == "x" and "BAD" not in env


TPU_VARS = (
    "TPU_VISIBLE_CHIPS",
    "TPU_CHIPS_PER_HOST_BOUNDS",
    "TPU_CHIPS_PER_PROCESS_BOUNDS",
    "TPU_HOST_BOUNDS",
    "TPU_PROCESS_BOUNDS",
    "ALLOW_MULTIPLE_LIBTPU_LOAD",
)


@pytest.mark.parametrize("chips", [1, 2, 4, 8])
def test_a_whole_tpu_host_unsets_every_tpu_variable(chips: int) -> None:
    # None is "unset": libtpu then uses its defaults, which carry the pod slice's own bounds.
    grant = grant_of({"TPU": chips}, devices("tpu", chips))
    assert grant.family_sizes == {"tpu": chips}
    assert grant.env(NO_ENV, hooks=False) == dict.fromkeys(TPU_VARS)


def test_part_of_a_tpu_host_gets_its_block_and_bounds() -> None:
    four_of_eight = grant_of({"TPU": 4}, devices("tpu", 8)).env(NO_ENV, hooks=False)
    assert four_of_eight == {
        "TPU_VISIBLE_CHIPS": "0,1,2,3",
        "TPU_CHIPS_PER_HOST_BOUNDS": "2,2,1",
        "TPU_CHIPS_PER_PROCESS_BOUNDS": "2,2,1",
        "TPU_HOST_BOUNDS": "1,1,1",
        "TPU_PROCESS_BOUNDS": "1,1,1",
        "ALLOW_MULTIPLE_LIBTPU_LOAD": "1",
    }
    two_of_four = grant_of({"TPU": 2}, devices("tpu", 4)).env(NO_ENV, hooks=False)
    assert two_of_four["TPU_VISIBLE_CHIPS"] == "0,1"
    assert two_of_four["TPU_CHIPS_PER_HOST_BOUNDS"] == "1,2,1"


def test_a_node_narrowed_by_the_inherited_env_is_not_a_whole_host() -> None:
    # The scheduler runs with TPU_VISIBLE_CHIPS=0,1 on a 4-chip host: its node has 2 chips, and
    # unsetting the variable in a worker would show it all 4, so the ids are written out.
    grant = grant_of({"TPU": 2}, devices("tpu", 2))
    env = grant.env({"TPU_VISIBLE_CHIPS": "0,1"}, hooks=False)
    assert env["TPU_VISIBLE_CHIPS"] == "0,1"
    assert env["TPU_CHIPS_PER_HOST_BOUNDS"] == "1,2,1"


def test_unset_is_none() -> None:
    grant = grant_of({"GPU": 1}, devices("amd", 2))
    env = grant.env(NO_ENV, hooks=False)
    assert env == {
        "ROCR_VISIBLE_DEVICES": "0",
        "HIP_VISIBLE_DEVICES": "0",
        "CUDA_VISIBLE_DEVICES": None,
    }


def test_json_round_trip() -> None:
    alloc = Allocator(make_node(devices("nvidia", 2, label="H100"), custom=1.0))
    grant = alloc.acquire({"GPU": 0.5, "custom": 1}, accelerator_type="H100")
    assert grant is not None
    data = json.loads(json.dumps(grant.to_dict()))
    copy = Grant.from_dict(data)
    assert copy == grant and hash(copy) == hash(grant)
    assert copy.to_dict() == grant.to_dict()
    assert copy.env(NO_ENV) == grant.env(NO_ENV)
    assert data["resources"] == {"GPU": 0.5, "custom": 1.0, "accelerator_type:H100": 0.001}
    assert data["family_sizes"] == {"nvidia": 2} and copy.family_sizes == {"nvidia": 2}
    assert pickle.loads(pickle.dumps(copy)) == grant
    assert data["devices"][0]["share"] == 0.5
    assert "nvidia:0*0.5" in repr(grant)


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"token": "7", "resources": {}, "devices": []},
        {"token": 1, "resources": [], "devices": []},
    ],
)
def test_from_dict_rejects_what_is_not_a_grant(data: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        Grant.from_dict(data)


def tpu_grant_env(tmp_path: object, chips: int, ask: int, **env: str) -> dict[str, Optional[str]]:
    """Detect a fake TPU host of ``chips`` chips under ``env``; the env of a grant of ``ask``."""
    from accelkit import FakeHost, Node, detect_node
    from accelkit_plugins.tpu.testing import make_host

    host = make_host(chips, tmp_path)
    node = detect_node(FakeHost(root=host.root, env=env))
    rebuilt = Node.from_dict(json.loads(json.dumps(node.to_dict())))  # as a scheduler stores it
    assert rebuilt.detected == node.detected == {"tpu": chips}
    grant = Allocator(rebuilt).acquire({"TPU": ask})
    assert grant is not None
    return grant.env(NO_ENV, hooks=False)


def test_a_detected_tpu_host_granted_whole_unsets_every_variable(tmp_path: object) -> None:
    assert tpu_grant_env(tmp_path, 4, 4) == dict.fromkeys(TPU_VARS)


@pytest.mark.parametrize(
    "narrowing",
    [
        {"ACCELKIT_EXCLUDE_DEVICES": "tpu:0,tpu:1,tpu:2,tpu:3"},
        {"ACCELKIT_OVERRIDE_RESOURCES": '{"TPU": 4}'},
        {"TPU_VISIBLE_CHIPS": "4,5,6,7"},
    ],
    ids=["excluded", "overridden", "visibility"],
)
def test_every_chip_a_narrowed_node_offers_is_still_a_block(
    tmp_path: object, narrowing: dict[str, str]
) -> None:
    # Half of an 8-chip host is left: granting all of it must not unset the variables, or the
    # worker would see all eight chips.
    env = tpu_grant_env(tmp_path, 8, 4, **narrowing)
    assert env["TPU_CHIPS_PER_HOST_BOUNDS"] == "2,2,1"
    assert env["TPU_HOST_BOUNDS"] == "1,1,1"
    assert env["TPU_VISIBLE_CHIPS"] in ("0,1,2,3", "4,5,6,7")


def test_an_untouched_family_without_its_plugin_here_does_not_stop_the_grant() -> None:
    """A node's JSON names a third-party family this worker has no plugin for; a grant of
    NVIDIA GPUs on it still writes its environment (only hiding that family needs the plugin)."""
    grant = Grant(1, {"GPU": 1.0}, [(devices("nvidia", 1)[0], 1.0)], families=["nvidia", "acme"])
    assert grant.env(NO_ENV, hooks=False)["CUDA_VISIBLE_DEVICES"] == "0"
    with pytest.raises(PluginError, match="acme"):
        grant.env(NO_ENV, hide_others=True, hooks=False)


def test_a_grants_env_applies_to_a_process_environment_setting_and_unsetting() -> None:
    from accelkit.schedule import apply_env, worker_environ

    changes = {"ROCR_VISIBLE_DEVICES": "1", "CUDA_VISIBLE_DEVICES": None, "UNSET_ALREADY": None}
    inherited = {"CUDA_VISIBLE_DEVICES": "0,1", "HOME": "/home/x"}
    assert worker_environ(changes, inherited) == {"ROCR_VISIBLE_DEVICES": "1", "HOME": "/home/x"}
    assert inherited == {"CUDA_VISIBLE_DEVICES": "0,1", "HOME": "/home/x"}  # a copy was changed
    apply_env(changes, inherited)
    assert inherited == {"ROCR_VISIBLE_DEVICES": "1", "HOME": "/home/x"}


def test_a_grant_is_said_with_its_family_where_several_families_serve_its_resource() -> None:
    node = make_node(devices("nvidia", 2), devices("amd", 4), devices("tpu", 4))
    alloc = Allocator(node)
    nvidia, amd, half, tpu = (
        alloc.acquire(request) for request in ({"GPU": 2}, {"GPU": 3}, {"GPU": 0.5}, {"TPU": 2})
    )
    assert nvidia is not None and amd is not None and half is not None and tpu is not None
    shared = shared_resources(node.devices)
    assert shared == {"GPU"}
    assert grant_text(nvidia) == "GPU 0,1"  # the ids alone: one family per resource assumed
    assert grant_text(nvidia, shared) == "nvidia GPU 0,1"
    assert grant_text(amd, shared) == "amd GPU 0,1,2"
    assert grant_text(half, shared) == "amd GPU 3 (0.5)"
    assert grant_text(tpu, shared) == "TPU 0,1"  # one family serves TPU: no name needed
    assert grant_text(Grant(9, {}, []), shared) == "nothing"


def test_a_grant_of_plain_capacity_is_said_with_it() -> None:
    """``ps`` and ``run`` said a grant of ``scratch_disk=2`` held "nothing"; the type resource a
    request pins is no holding of its own."""
    node = make_node(devices("nvidia", 2))
    node.resources["scratch_disk"] = 4.0
    alloc = Allocator(node)
    disk = alloc.acquire({"scratch_disk": 2})
    both = alloc.acquire({"GPU": 1, "scratch_disk": 0.5})
    assert disk is not None and both is not None
    assert grant_text(disk) == "scratch_disk=2"
    assert grant_text(both) == "GPU 0; scratch_disk=0.5"


def test_devices_of_one_resource_from_several_families_always_name_them() -> None:
    nvidia, amd = devices("nvidia", 1), devices("amd", 2)
    held = [(nvidia[0], 1.0), (amd[0], 1.0), (amd[1], 1.0)]
    assert devices_text(held) == "nvidia GPU 0; amd GPU 0,1"
    assert shared_resources([*nvidia, *devices("tpu", 1)]) == frozenset()
