"""Every export format on every example node, each read by its consumer's own rules: Ray's
``ray start`` option parser, a ``gres.conf`` reader written from SLURM's documented grammar,
Kubernetes label syntax for NFD feature files, and distributed's ``dask worker`` options."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import warnings
from collections.abc import Iterator

import pytest
from accelkit import Device, Node, detect_node, load_snapshot
from accelkit.exports import to_dask, to_gres, to_nfd, to_ray
from accelkit.exports._gres import _ranges
from accelkit.exports._labels import label_value, relabel
from accelkit.exports._ray import RAY_ACCELERATOR_RESOURCES
from accelkit.policy import FamilyPolicy
from engine_nodes import NODES, ROOT, SNAPSHOTS
from hypothesis import given
from hypothesis import strategies as st

IDS = [path.name if path.name != "node" else "acme-example" for path in NODES]
NEEDS_RAY = pytest.mark.skipif(
    importlib.util.find_spec("ray") is None,
    reason="needs ray (the test extra installs it): Ray's own parser reads the arguments",
)


@pytest.fixture(params=NODES, ids=IDS, scope="module")
def node(request: pytest.FixtureRequest) -> Node:
    return detect_node(load_snapshot(request.param))


# -- Ray ---------------------------------------------------------------------------------------


@NEEDS_RAY
def test_ray_start_parses_the_arguments_into_the_node_resources_and_labels(node: Node) -> None:
    from ray._private.label_utils import parse_node_labels_string
    from ray._private.parameter import RayParams
    from ray._private.utils import parse_resources_json
    from ray.autoscaler._private.cli_logger import cf, cli_logger
    from ray.scripts.scripts import start

    params = start.make_context("start", ["--head", *to_ray(node)]).params
    resources = parse_resources_json(params["resources"], cli_logger, cf)
    labels = parse_node_labels_string(params["labels"])
    # RayParams refuses GPU (and CPU, memory) inside resources, as `ray start` does.
    RayParams(num_gpus=params["num_gpus"], resources=resources, labels=labels)
    offered = {**resources, "GPU": params["num_gpus"]}
    assert {name: n for name, n in offered.items() if n or name in node.resources} == (
        node.resources
    )
    assert {name for name, n in offered.items() if not n} >= (
        set(RAY_ACCELERATOR_RESOURCES) - set(node.resources)
    )
    assert labels == {"accelkit/" + k.split("/", 1)[1]: v for k, v in node.labels.items()}


@NEEDS_RAY
def test_rays_accelerator_resources_are_the_ones_ray_detects() -> None:
    """The core's list of what a raylet detects on its own holds everything the installed Ray
    detects (an older Ray, as on Python 3.9, detects fewer; a newer one that detects more fails
    this, and its names join the list)."""
    from ray._private.accelerators import get_all_accelerator_resource_names

    assert get_all_accelerator_resource_names() <= set(RAY_ACCELERATOR_RESOURCES)
    assert len(RAY_ACCELERATOR_RESOURCES) == len(set(RAY_ACCELERATOR_RESOURCES))


@pytest.fixture
def ray_finds_eight_of_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each of Ray's accelerator managers finds 8 devices on this machine (NVIDIA's serving
    ``GPU``), none narrowed by a variable, no type: what a raylet would count of each family
    that ``ray start`` gives no number of."""
    from ray._private import accelerators

    managers = accelerators.get_all_accelerator_managers()
    for manager in managers:
        monkeypatch.setattr(manager, "get_current_node_num_accelerators", staticmethod(lambda: 8))
        for name in (
            "get_current_process_visible_accelerator_ids",
            "get_current_node_accelerator_type",
            "get_current_node_additional_resources",
        ):
            monkeypatch.setattr(manager, name, staticmethod(lambda: None))
    by_resource = {manager.get_resource_name(): manager for manager in managers}
    by_resource["GPU"] = accelerators.NvidiaGPUAcceleratorManager
    lookup = accelerators.get_accelerator_manager_for_resource  # Ray's cache of that choice
    monkeypatch.setattr(lookup, "_resource_name_to_accelerator_manager", by_resource, raising=False)
    monkeypatch.delenv("RAY_OVERRIDE_RESOURCES", raising=False)


def rays_node(arguments: list[str]) -> dict[str, float]:
    """The resources a raylet started with ``arguments`` offers, as Ray's own
    ``ResourceAndLabelSpec`` resolves them (Ray's CPU, memory and address resources left out)."""
    from ray._private.resource_and_label_spec import ResourceAndLabelSpec
    from ray._private.utils import parse_resources_json
    from ray.autoscaler._private.cli_logger import cf, cli_logger
    from ray.scripts.scripts import start

    params = start.make_context("start", ["--head", *arguments]).params
    spec = ResourceAndLabelSpec(
        num_cpus=1,
        num_gpus=params["num_gpus"],
        memory=10**9,
        object_store_memory=10**9,
        resources=parse_resources_json(params["resources"] or "{}", cli_logger, cf),
    )
    offered = spec.resolve(is_head=True, node_ip_address="127.0.0.1").to_resource_dict()
    return {
        name: amount
        for name, amount in offered.items()
        if name not in ("CPU", "memory", "object_store_memory") and not name.startswith("node:")
    }


EMPTIED = {
    "gpu-overridden-to-0": ("nvidia-h100-8gpu", {}, {"GPU": 0}),
    "every-gpu-excluded": (
        "nvidia-h100-8gpu",
        {"ACCELKIT_EXCLUDE_DEVICES": ",".join(f"nvidia:{n}" for n in range(8))},
        None,
    ),
    "every-core-excluded": (
        "neuron-trn1-32xlarge",
        {"ACCELKIT_EXCLUDE_DEVICES": ",".join(f"neuron:{n}" for n in range(32))},
        None,
    ),
}


@NEEDS_RAY
@pytest.mark.usefixtures("ray_finds_eight_of_everything")
def test_a_raylet_offers_only_what_the_node_offers(node: Node) -> None:
    """A raylet counts what its managers find of every accelerator it is given no number of:
    beside the node's own resources, ``to_ray`` gives it 0 of each, so it adds none."""
    assert rays_node(to_ray(node)) == node.resources


@NEEDS_RAY
@pytest.mark.usefixtures("ray_finds_eight_of_everything")
@pytest.mark.parametrize(("snapshot", "env", "override"), EMPTIED.values(), ids=list(EMPTIED))
def test_a_raylet_offers_no_devices_of_a_family_the_node_left_none_of(
    snapshot: str, env: dict[str, str], override: dict[str, float]
) -> None:
    # With GPU=0 no --num-gpus was written, which Ray reads as "detect": the raylet offered
    # the 8 GPUs the operator had taken away (and 8 of another family beside them).
    node = detect_node(load_snapshot(SNAPSHOTS / snapshot, env=env), override)
    assert "GPU" not in node.resources or override
    arguments = to_ray(node)
    assert rays_node(arguments) == {name: n for name, n in node.resources.items() if n}
    assert arguments[0] == "--num-gpus=0"


def test_ray_arguments_survive_shell_word_splitting() -> None:
    """``ray start $(accelkit resources --format ray)``: each argument arrives whole."""
    host = str(SNAPSHOTS / "mixed-nvidia-ascend")
    command = (
        f'printf "%s\\n" $({sys.executable} -m accelkit.cli resources --format ray --host {host})'
    )
    words = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True)
    assert words.stdout.splitlines() == to_ray(detect_node(load_snapshot(host)))


def test_ray_export_warns_where_rays_gpu_ids_are_not_the_nodes() -> None:
    # Ray hands out --num-gpus=7 as CUDA ordinals 0-6: with GPU 3 excluded, a task on "3" ran
    # on the GPU the operator left out, and GPU 7 was never used.
    h100 = str(SNAPSHOTS / "nvidia-h100-8gpu")
    excluded = detect_node(load_snapshot(h100, env={"ACCELKIT_EXCLUDE_DEVICES": "nvidia:3"}))
    with pytest.warns(UserWarning, match=r"CUDA_VISIBLE_DEVICES=0,1,2,4,5,6,7 ray start") as said:
        assert to_ray(excluded)[0] == "--num-gpus=7"
    assert said[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        to_ray(detect_node(load_snapshot(h100)))  # ids 0-7: nothing to say
        # a shell's own variable narrows the node: a raylet started there inherits it
        narrowed = load_snapshot(h100, env={"CUDA_VISIBLE_DEVICES": "2,3"})
        assert to_ray(detect_node(narrowed))[0] == "--num-gpus=2"
    narrowed_and_excluded = {
        "CUDA_VISIBLE_DEVICES": "2,3,5",
        "ACCELKIT_EXCLUDE_DEVICES": "nvidia:3",
    }
    with pytest.warns(UserWarning, match=r"CUDA_VISIBLE_DEVICES=2,5 ray start"):
        to_ray(detect_node(load_snapshot(h100, env=narrowed_and_excluded)))


RAY_NUMBERED = {
    "neuron": ("neuron-trn1-32xlarge", "neuron:5", "NEURON_RT_VISIBLE_CORES=0,1,2,3,4,6,7,"),
    "gaudi": ("gaudi2-8", "gaudi:3", "HABANA_VISIBLE_MODULES=0,1,2,4,5,6,7 ray start"),
    "ascend": ("ascend-910b-8", "ascend:3", "ASCEND_RT_VISIBLE_DEVICES=0,1,2,4,5,6,7 ray start"),
    "tpu": ("tpu-v6e-8", "tpu:1", "TPU_VISIBLE_CHIPS=0,2,3,4,5,6,7 ray start"),
}


@pytest.mark.parametrize(
    ("snapshot", "excluded", "advice"), RAY_NUMBERED.values(), ids=list(RAY_NUMBERED)
)
def test_ray_export_warns_where_rays_ids_are_not_the_nodes_for_every_family_ray_numbers(
    snapshot: str, excluded: str, advice: str
) -> None:
    # Ray hands out "neuron_cores":31 as cores 0-30, whatever family: with core 5 excluded, a
    # task on core 5 ran on the core the operator left out, and no warning said so.
    node = detect_node(
        load_snapshot(SNAPSHOTS / snapshot, env={"ACCELKIT_EXCLUDE_DEVICES": excluded})
    )
    with pytest.warns(UserWarning, match=re.escape(advice)) as said:
        to_ray(node)
    assert said[0].filename == __file__
    assert len(said) == 1


def test_ray_export_advises_a_comma_list_ray_can_read() -> None:
    """Ray splits a raylet's ``NEURON_RT_VISIBLE_CORES`` on ``,`` and reads no ranges: the
    advice lists every core, not the family's own ``0-4,6-31``."""
    trn1 = load_snapshot(
        SNAPSHOTS / "neuron-trn1-32xlarge", env={"ACCELKIT_EXCLUDE_DEVICES": "neuron:5"}
    )
    with pytest.warns(UserWarning) as said:
        to_ray(detect_node(trn1))
    listed = re.search(r"NEURON_RT_VISIBLE_CORES=(\S+) ray start", str(said[0].message))
    assert listed is not None
    assert listed.group(1).split(",") == [str(n) for n in range(32) if n != 5]


def test_ray_refuses_what_ray_start_cannot_take() -> None:
    with pytest.raises(ValueError, match=r"whole number; this node has GPU=0\.5"):
        to_ray(Node(resources={"GPU": 0.5}))
    with pytest.raises(ValueError, match="reserves the resource name"):
        to_ray(Node(resources={"memory": 1.0}))


RAY_REFUSES = [
    (
        {"license": 0.5},
        r"whole quantities of a node's resources; this node has \{'license': 0\.5\}",
    ),
    (
        {"node:__internal_head__": 1.0},
        r"reserves the resource name\(s\) \['node:__internal_head__'\]",
    ),
    ({"big": 2e14}, r"at most 1e\+14 of a resource; this node has \{'big': 200000000000000\.0\}"),
]


@NEEDS_RAY
@pytest.mark.parametrize(("resources", "message"), RAY_REFUSES, ids=["fraction", "head", "huge"])
def test_ray_refuses_node_resources_that_ray_itself_refuses(
    resources: dict[str, float], message: str
) -> None:
    """Ray's own check of a node's resources (``ResourceAndLabelSpec``) is the oracle: what it
    refuses, ``to_ray`` refuses first, so ``ray start $(...)`` never gets it."""
    from ray._private.resource_and_label_spec import ResourceAndLabelSpec

    spec = ResourceAndLabelSpec(
        num_cpus=1, num_gpus=0, memory=10**9, object_store_memory=10**9, resources=resources
    )
    with pytest.raises(ValueError):
        spec.resolve(is_head=True, node_ip_address="127.0.0.1").to_resource_dict()
    with pytest.raises(ValueError, match=message):
        to_ray(Node(resources=resources))


def test_ray_refuses_another_nodes_address_resource() -> None:
    """``node:<ip>`` is the resource Ray gives each node its own address: one offered by another
    node would draw tasks meant for that address."""
    with pytest.raises(ValueError, match=r"reserves the resource name\(s\) \['node:10\.0\.0\.7'\]"):
        to_ray(Node(resources={"node:10.0.0.7": 1.0}))


# -- Dask --------------------------------------------------------------------------------------


def test_dask_worker_reads_the_resources_option(node: Node) -> None:
    from distributed.cli.dask_worker import main

    argv = shlex.split(to_dask(node))
    params = main.make_context("dask-worker", ["tcp://127.0.0.1:8786", *argv]).params
    # distributed's own reading of --resources (dask_worker.py): pairs split on blanks/commas.
    pairs = params["resources"].replace(",", " ").split()
    assert {k: float(v) for k, v in (pair.split("=") for pair in pairs)} == node.resources


RESOURCE_NAMES = st.from_regex(r"[A-Za-z][A-Za-z0-9_.:\-]{0,20}", fullmatch=True).filter(
    lambda name: (
        name not in ("GPU", "CPU", "memory", "object_store_memory") and not name.startswith("node:")
    )
)
AMOUNTS = st.integers(1, 10**8).map(lambda units: units / 10**4)
WHOLE_AMOUNTS = st.integers(1, 10**8).map(float)


@NEEDS_RAY
@given(st.dictionaries(RESOURCE_NAMES, WHOLE_AMOUNTS), st.integers(0, 64))
def test_any_whole_node_resources_survive_ray_start(resources: dict[str, float], gpus: int) -> None:
    from ray._private.utils import parse_resources_json
    from ray.autoscaler._private.cli_logger import cf, cli_logger
    from ray.scripts.scripts import start

    node = Node(resources={**resources, "GPU": float(gpus)})
    params = start.make_context("start", to_ray(node)).params
    offered = {**parse_resources_json(params["resources"], cli_logger, cf), "GPU": gpus}
    assert {name: n for name, n in offered.items() if n or name in node.resources} == (
        node.resources
    )


@given(st.dictionaries(RESOURCE_NAMES, AMOUNTS), st.integers(0, 64))
def test_any_node_resources_survive_the_dask_worker_reading(
    resources: dict[str, float], gpus: int
) -> None:
    node = Node(resources={**resources, "GPU": float(gpus)})
    pairs = shlex.split(to_dask(node))[1].split()
    assert {k: float(v) for k, v in (pair.split("=") for pair in pairs)} == node.resources


def test_the_guides_dask_worker_line_gives_dask_the_node_resources() -> None:
    """The documented line, run by a shell with ``dask worker`` standing for a printer of its
    arguments, which distributed's own ``dask worker`` parser then reads."""
    from distributed.cli.dask_worker import main

    guide = (ROOT / "docs" / "running-at-scale.md").read_text()
    line = next(line for line in guide.splitlines() if 'eval "dask worker' in line)
    host = SNAPSHOTS / "nvidia-h100-8gpu"
    script = line.replace(
        "accelkit resources --format dask",
        f"{sys.executable} -m accelkit.cli resources --format dask --host {host}",
    ).replace("dask worker", "printf '%s\\n'")
    words = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True)
    params = main.make_context("dask-worker", words.stdout.splitlines()).params
    pairs = params["resources"].replace(",", " ").split()
    node = detect_node(load_snapshot(host))
    assert {k: float(v) for k, v in (pair.split("=") for pair in pairs)} == node.resources
    assert params["scheduler"] == "tcp://SCHEDULER:8786"


def test_dask_refuses_names_it_would_split() -> None:
    with pytest.raises(ValueError, match="'a=b'"):
        to_dask(Node(resources={"a=b": 1.0}))


# -- SLURM gres.conf ---------------------------------------------------------------------------

GRES_KEYS = {"name", "type", "file", "count", "cores", "flags", "links", "multiplefiles"}
GRES_FLAGS = {
    "countonly",
    "explicit",
    "one_sharing",
    "amd_gpu_env",
    "intel_gpu_env",
    "nvidia_gpu_env",
    "opencl_env",
}
COUNT = re.compile(r"^(\d+)([KMGTP]?)$")
BRACKETS = re.compile(r"^([^\[\]]*)\[([^\[\]]+)\]([^\[\]]*)$")


def expand(hostlist: str) -> list[str]:
    """SLURM's bracket notation, as gres.conf ``File`` takes it: ``/dev/nvidia[0-3,5]``."""
    found = BRACKETS.match(hostlist)
    if found is None:
        assert "[" not in hostlist and "]" not in hostlist, hostlist
        return [hostlist]
    prefix, body, suffix = found.groups()
    names: list[str] = []
    for part in body.split(","):
        low, _, high = part.partition("-")
        assert low.isdigit() and (not high or high.isdigit()), part
        stop = int(high) if high else int(low)
        assert stop >= int(low), part
        names += [f"{prefix}{n:0{len(low)}d}{suffix}" for n in range(int(low), stop + 1)]
    return names


def read_gres_conf(text: str) -> Iterator[dict[str, object]]:
    """gres.conf per slurm.conf(5)/gres.conf(5): ``#`` comments, then lines of blank-separated,
    case-insensitive ``Key=Value`` pairs; ``Name`` required; ``File`` bracket ranges; ``Count``
    a number with an optional K/M/G/T/P suffix, equal to the files' number when both appear;
    ``Flags`` a comma-separated list of the documented flags."""
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        entry: dict[str, str] = {}
        for pair in line.split():
            key, sep, value = pair.partition("=")
            assert sep and value, f"{pair!r} is not Key=Value"
            assert key.lower() in GRES_KEYS, f"unknown gres.conf key {key!r}"
            assert key.lower() not in entry, f"{key} given twice in {line!r}"
            entry[key.lower()] = value
        assert "name" in entry, f"no Name in {line!r}"
        for word in ("name", "type"):
            assert not set(entry.get(word, "")) & set(":,="), entry
        files = expand(entry["file"]) if "file" in entry else None
        count = None
        if "count" in entry:
            match = COUNT.match(entry["count"])
            assert match, entry["count"]
            count = int(match.group(1)) * 1024 ** " KMGTP".index(match.group(2) or " ")
        if files is not None and count is not None:
            assert count == len(files), entry
        for flag in entry.get("flags", "").split(",") if "flags" in entry else []:
            assert flag.lower() in GRES_FLAGS, flag
        yield {
            "name": entry["name"],
            "type": entry.get("type"),
            "count": len(files) if files is not None else (count or 1),
            "files": files,
            "flags": entry.get("flags"),
        }


def read_slurm_conf_gres(text: str) -> dict[tuple[str, object], int]:
    """The ``Gres=`` value of a slurm.conf NodeName line: ``name[:type]:count``, comma-joined."""
    totals: dict[tuple[str, object], int] = {}
    for item in text.split(","):
        parts = item.split(":")
        assert 2 <= len(parts) <= 3 and parts[-1].isdigit(), item
        totals[(parts[0], parts[1] if len(parts) == 3 else None)] = int(parts[-1])
    return totals


def slurm_conf_line(text: str, parameter: str) -> str:
    """The value a ``# slurm.conf: <parameter>=...`` comment line gives."""
    prefix = f"# slurm.conf: {parameter}="
    return next(line for line in text.splitlines() if line.startswith(prefix))[len(prefix) :]


def test_gres_conf_follows_slurms_grammar_and_counts_every_device(node: Node) -> None:
    text = to_gres(node)
    entries = list(read_gres_conf(text))
    assert sum(e["count"] for e in entries) == len(node.devices)  # type: ignore[misc]
    totals: dict[tuple[str, object], int] = {}
    for e in entries:
        key = (str(e["name"]), e["type"])
        totals[key] = totals.get(key, 0) + int(e["count"])  # type: ignore[call-overload]
    assert read_slurm_conf_gres(slurm_conf_line(text, "Gres")) == totals
    # slurm.conf(5): "No generic resources are managed by default": GresTypes names them all.
    assert slurm_conf_line(text, "GresTypes").split(",") == list(
        dict.fromkeys(str(e["name"]) for e in entries)
    )
    lines = text.splitlines()
    for e in entries:
        line = next(n for n, t in enumerate(lines) if t.startswith(f"Name={e['name']} "))
        if e["name"] == "gpu" and e["files"]:
            assert e["flags"] == "nvidia_gpu_env"
            # each GPU's own file, in the GPUs' PCI (index) order: SLURM numbers a job's
            # CUDA_VISIBLE_DEVICES by a file's place in the list
            gpus = sorted((d for d in node.devices if d.family == "nvidia"), key=lambda d: d.index)
            assert e["files"] == [f"/dev/nvidia{d.minor}" for d in gpus]
        else:  # SLURM sets no variable for a count or another name, and the line above says so
            assert e["flags"] is None
            assert "SLURM sets no " in lines[line - 1], lines[line - 1]
    assert_slurmd_starts(text)


def test_amd_and_intel_gpus_are_counts_that_say_slurm_sets_no_variable() -> None:
    amd = to_gres(detect_node(load_snapshot(SNAPSHOTS / "amd-mi300x-8gpu"))).splitlines()
    assert amd == [
        "# slurm.conf: GresTypes=gpu",
        "# slurm.conf: Gres=gpu:amd-instinct-mi300x-oam:8",
        "# a count: SLURM sets no ROCR_VISIBLE_DEVICES for jobs; the TaskProlog recipe can "
        "(accelkit env --format taskprolog)",
        "Name=gpu Type=amd-instinct-mi300x-oam Count=8",
    ]
    intel = to_gres(detect_node(load_snapshot(SNAPSHOTS / "intel-max1550-4gpu")))
    assert "SLURM sets no ONEAPI_DEVICE_SELECTOR for jobs" in intel


def test_gres_binds_files_only_where_every_id_names_one() -> None:
    policy = FamilyPolicy(
        "nvidia",
        "GPU",
        visible_devices_env_var="CUDA_VISIBLE_DEVICES",
        device_file="/dev/nvidia{id}",
    )
    gpus = [Device(str(n), n, "nvidia", "GPU", "A100") for n in (0, 1, 2, 3)]
    mig = [Device("MIG-abc", 0, "nvidia", "GPU", "A100-1g.5gb", parent="0")]
    assert to_gres(Node(devices=gpus, policies={"nvidia": policy})).splitlines() == [
        "# slurm.conf: GresTypes=gpu",
        "# slurm.conf: Gres=gpu:a100:4",
        "Name=gpu Type=a100 File=/dev/nvidia[0-3] Flags=nvidia_gpu_env",
    ]
    assert "Count=1" in to_gres(Node(devices=mig, policies={"nvidia": policy}))
    assert to_gres(Node()).startswith("#")


def assert_slurmd_starts(text: str) -> None:
    """What slurmd checks of the records of one name before it starts (src/interfaces/gres.c,
    ``_foreach_slurm_conf``): fatal "some records have "File" specification while others do
    not", the same for "Type=", and "duplicate records" for several with neither."""
    by_name: dict[object, list[dict[str, object]]] = {}
    for entry in read_gres_conf(text):
        by_name.setdefault(entry["name"], []).append(entry)
    for name, entries in by_name.items():
        assert len({e["files"] is None for e in entries}) == 1, f"{name}: File= mixed: {text}"
        assert len({e["type"] is None for e in entries}) == 1, f"{name}: Type= mixed: {text}"
        untyped_counts = [e for e in entries if e["files"] is None and e["type"] is None]
        assert len(untyped_counts) < 2 or len(entries) == 1, f"{name}: duplicate records"


NVIDIA_BY_ID = FamilyPolicy(
    "nvidia", "GPU", visible_devices_env_var="CUDA_VISIBLE_DEVICES", device_file="/dev/nvidia{id}"
)
NVIDIA_BY_MINOR = FamilyPolicy(
    "nvidia",
    "GPU",
    visible_devices_env_var="CUDA_VISIBLE_DEVICES",
    device_file="/dev/nvidia{minor}",
)
AMD = FamilyPolicy("amd", "GPU", visible_devices_env_var="ROCR_VISIBLE_DEVICES")
RBLN = FamilyPolicy(
    "rbln", "RBLN", visible_devices_env_var="RBLN_DEVICES", device_file="/dev/rbln{id}"
)


def binds_files(text: str) -> bool:
    return any(entry["files"] is not None for entry in read_gres_conf(text))


def gres_via_cli(*argv: str, **env: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "accelkit.cli", "resources", "--format", "gres", *argv],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **env},
    ).stdout


def test_gres_binds_each_gpu_to_its_device_minor_from_the_snapshot() -> None:
    """The recorded node's GPU 0 (bus 18) is /dev/nvidia4 and GPU 4 (bus 9a) /dev/nvidia0
    (its /proc/driver/nvidia/gpus/*/information): leaving GPU 0 out leaves /dev/nvidia4 out."""
    host = str(SNAPSHOTS / "nvidia-h100-8gpu")
    node = detect_node(load_snapshot(host))
    assert [d.minor for d in node.devices] == [4, 5, 6, 7, 0, 1, 2, 3]
    assert Node.from_dict(node.to_dict()).devices == node.devices
    text = gres_via_cli("--host", host, ACCELKIT_EXCLUDE_DEVICES="nvidia:0")
    # in the GPUs' PCI order: SLURM numbers CUDA_VISIBLE_DEVICES by a file's place in the list
    assert "Name=gpu Type=h100 File=/dev/nvidia[5-7,0-3] Flags=nvidia_gpu_env" in text


def test_gres_takes_nvml_minors_and_guesses_none_it_was_not_given() -> None:
    from accelkit import FakeHost
    from accelkit.testing.fakes.nvidia import fake_gpus, fake_pynvml
    from accelkit_plugins.nvidia.testing import NVIDIA_SMI_ARGV, nvidia_smi_output

    gpus = fake_gpus(3)  # minors 4, 5, 6
    by_nvml = detect_node(FakeHost(modules={"pynvml": fake_pynvml(gpus)}))
    assert "File=/dev/nvidia[4-6]" in to_gres(by_nvml)
    smi = {NVIDIA_SMI_ARGV: (0, nvidia_smi_output(gpus))}  # and no driver files: no minor
    lines = to_gres(detect_node(FakeHost(commands=smi))).splitlines()
    assert lines[-1] == "Name=gpu Type=h100 Count=3"
    mig = Device("MIG-abc", 0, "nvidia", "GPU", "A100-1g.5gb", parent="0", minor=4)
    assert "Count=1" in to_gres(Node(devices=[mig], policies={"nvidia": NVIDIA_BY_MINOR}))


@pytest.mark.parametrize("source", ["override", "env"])
def test_devices_made_by_configuration_bind_no_file(source: str) -> None:
    gpus = [Device(str(n), n, "nvidia", "GPU", source=source, minor=n) for n in (0, 1)]
    cards = [Device(str(n), n, "rbln", "RBLN", source=source) for n in (0, 1)]
    for policy in (NVIDIA_BY_ID, NVIDIA_BY_MINOR):
        assert not binds_files(to_gres(Node(devices=gpus, policies={"nvidia": policy})))
    assert not binds_files(to_gres(Node(devices=cards, policies={"rbln": RBLN})))


def test_an_override_on_a_machine_without_gpus_binds_no_file() -> None:
    text = gres_via_cli(ACCELKIT_OVERRIDE_RESOURCES='{"GPU": 2}')
    assert not binds_files(text) and "Name=gpu Count=2" in text


MIXED = {
    "a MIG GPU beside whole GPUs": (
        [
            Device("MIG-aaaa", 0, "nvidia", "GPU", "A100-3g.40gb", parent="0"),
            Device("MIG-bbbb", 1, "nvidia", "GPU", "A100-3g.40gb", parent="0"),
            *(Device(str(n), n, "nvidia", "GPU", "A100") for n in (1, 2, 3)),
        ],
        ["Name=gpu Type=a100-3g.40gb Count=2", "Name=gpu Type=a100 Count=3"],
    ),
    "NVIDIA beside AMD": (
        [
            *(Device(str(n), n, "nvidia", "GPU", "A10") for n in (0, 1)),
            *(Device(str(n), n, "amd", "GPU", "AMD-Instinct-MI210") for n in (0, 1)),
        ],
        ["Name=gpu Type=a10 Count=2", "Name=gpu Type=amd-instinct-mi210 Count=2"],
    ),
    "typed beside untyped": (
        [Device("0", 0, "nvidia", "GPU", "A10"), Device("0", 0, "amd", "GPU", None)],
        ["Name=gpu Type=a10 Count=1", "Name=gpu Type=amd Count=1"],
    ),
    "two untyped families": (
        [Device("0", 0, "nvidia", "GPU"), Device("0", 0, "amd", "GPU")],
        ["Name=gpu Type=nvidia Count=1", "Name=gpu Type=amd Count=1"],
    ),
}


@pytest.mark.parametrize("case", MIXED)
def test_the_records_of_one_name_agree_and_a_comment_says_why(case: str) -> None:
    devices, records = MIXED[case]
    text = to_gres(Node(devices=devices, policies={"nvidia": NVIDIA_BY_ID, "amd": AMD}))
    assert_slurmd_starts(text)
    assert [line for line in text.splitlines() if line.startswith("Name=")] == records
    assert any(line.startswith("# gpu: ") and "slurmd stops" in line for line in text.splitlines())
    totals = read_slurm_conf_gres(slurm_conf_line(text, "Gres"))
    assert sum(totals.values()) == len(devices) and None not in {t for _, t in totals}


def test_an_override_beyond_the_gpus_makes_every_gpu_record_a_count() -> None:
    host = str(SNAPSHOTS / "nvidia-h100-8gpu")
    text = gres_via_cli("--host", host, ACCELKIT_OVERRIDE_RESOURCES='{"GPU": 10}')
    assert_slurmd_starts(text)
    assert not binds_files(text)
    assert read_slurm_conf_gres(slurm_conf_line(text, "Gres")) == {
        ("gpu", "h100"): 8,
        ("gpu", "nvidia"): 2,
    }


def test_files_of_another_name_say_slurm_sets_no_variable_for_them() -> None:
    cards = [Device(str(n), n, "rbln", "RBLN", "RBLN-CA12", source="devfs") for n in range(4)]
    lines = to_gres(Node(devices=cards, policies={"rbln": RBLN})).splitlines()
    assert lines[-1] == "Name=rbln Type=rbln-ca12 File=/dev/rbln[0-3]"
    assert "SLURM sets no RBLN_DEVICES for jobs" in lines[-2]
    assert "accelkit env --format taskprolog" in lines[-2]


def slurm_places(text: str, name: str) -> list[str]:
    """The files of ``name`` in the order SLURM numbers them: their place across the records
    (``gres.c``, ``_foreach_fill_in_gres_devices``), which SLURM writes into a job's
    ``CUDA_VISIBLE_DEVICES`` unless cgroup.conf constrains devices (``gres_common.c``)."""
    files: list[str] = []
    for entry in read_gres_conf(text):
        if entry["name"] == name:
            assert isinstance(entry["files"], list), entry
            files += entry["files"]
    return files


def test_gres_keeps_gpus_of_alternating_types_in_the_places_slurm_numbers_them() -> None:
    # Type=a100 File=/dev/nvidia[...0,2,4,6] then Type=h100 [...1,3,5,7]: SLURM numbered the
    # files in that order, and a job given GPU 2 got CUDA_VISIBLE_DEVICES=1, an H100.
    gpus = [
        Device(str(n), n, "nvidia", "GPU", ("A100", "H100")[n % 2], minor=7 - n, source="library")
        for n in range(8)
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the places are the ids: nothing to warn about
        text = to_gres(Node(devices=gpus, policies={"nvidia": NVIDIA_BY_MINOR}))
    assert_slurmd_starts(text)
    places = slurm_places(text, "gpu")
    for gpu in gpus:
        assert places.index(f"/dev/nvidia{gpu.minor}") == int(gpu.id), text
    entries = list(read_gres_conf(text))
    assert [e["type"] for e in entries] == ["a100", "h100"] * 4
    assert {e["flags"] for e in entries} == {"nvidia_gpu_env"}
    assert read_slurm_conf_gres(slurm_conf_line(text, "Gres")) == {
        ("gpu", "a100"): 4,
        ("gpu", "h100"): 4,
    }
    assert "ConstrainDevices" not in text


def test_gres_says_an_excluded_gpu_needs_constrained_devices() -> None:
    # File=/dev/nvidia[4-5,7,0-3] without GPU 2: a job given /dev/nvidia7 (GPU 3), in place 2,
    # got CUDA_VISIBLE_DEVICES=2 and ran on the GPU the operator had left out.
    h100 = load_snapshot(
        SNAPSHOTS / "nvidia-h100-8gpu", env={"ACCELKIT_EXCLUDE_DEVICES": "nvidia:2"}
    )
    node = detect_node(h100)
    with pytest.warns(UserWarning, match=r"ConstrainDevices=yes") as said:
        text = to_gres(node)
    assert said[0].filename == __file__
    assert slurm_places(text, "gpu") == [f"/dev/nvidia{n}" for n in (4, 5, 7, 0, 1, 2, 3)]
    comment = next(line for line in text.splitlines() if "ConstrainDevices" in line)
    assert comment.startswith("# gpu: ")
    assert "cgroup.conf" in comment and "0,1,3,4,5,6,7" in comment
    assert_slurmd_starts(text)


def test_gres_counts_of_alternating_types_are_one_record_per_type() -> None:
    """A count has no place to keep: runs of one type that files kept apart are one again."""
    gpus = [Device(str(n), n, "nvidia", "GPU", ("A100", "H100")[n % 2]) for n in range(4)]
    lines = to_gres(Node(devices=gpus, policies={"nvidia": NVIDIA_BY_MINOR})).splitlines()
    assert [line for line in lines if line.startswith("Name=")] == [
        "Name=gpu Type=a100 Count=2",
        "Name=gpu Type=h100 Count=2",
    ]


@given(st.sets(st.integers(0, 300), min_size=2))
def test_bracket_ranges_expand_back_to_the_numbers(numbers: set[int]) -> None:
    names = expand(f"/dev/x[{_ranges(sorted(numbers))}]")
    assert names == [f"/dev/x{n}" for n in sorted(numbers)]


# -- Kubernetes NFD ----------------------------------------------------------------------------

DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
"""Kubernetes' label name and value syntax (k8s.io/apimachinery validation): at most 63
characters; a value may also be empty."""


def check_label(key: str, value: str) -> None:
    prefix, _, name = key.rpartition("/")
    assert len(prefix) <= 253 and DNS_SUBDOMAIN.match(prefix), key
    assert len(name) <= 63 and LABEL_NAME.match(name), key
    assert value == "" or (len(value) <= 63 and LABEL_NAME.match(value)), value


def test_nfd_feature_file_lines_are_labels_nfd_accepts(node: Node) -> None:
    features = {}
    for line in to_nfd(node).splitlines():
        if line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        assert sep, line
        check_label(key, value)
        # NFD accepts any *.feature.node.kubernetes.io namespace without configuration.
        assert key.split("/")[0].endswith(".feature.node.kubernetes.io"), key
        features[key.split("/")[1]] = value
    assert features == {k.split("/", 1)[1]: v for k, v in node.labels.items()}


@given(
    st.dictionaries(
        st.text(min_size=1).filter(
            lambda s: any(c.isalnum() and c.isascii() for c in s.rpartition("/")[2])
        ),
        st.text(),
    )
)
def test_any_label_is_exported_in_label_syntax(labels: dict[str, str]) -> None:
    try:
        exported = relabel(labels, "example.com/")
    except ValueError as error:
        assert "would both be exported as" in str(error)
        return
    for key, value in exported.items():
        check_label(key, value)


def test_labels_outside_the_syntax_are_rewritten_not_dropped() -> None:
    assert label_value("Intel(R) Max 1550") == "Intel-R--Max-1550"
    assert relabel({"site/model": " A100 (80GB) "}, "accelkit/") == {"accelkit/model": "A100--80GB"}
    with pytest.raises(ValueError, match="'a/model' and 'b/model'"):
        relabel({"a/model": "x", "b/model": "y"}, "accelkit/")
    with pytest.raises(ValueError, match="no name"):
        relabel({"site/(!)": "x"}, "accelkit/")


# -- the CLI -----------------------------------------------------------------------------------


def test_resources_json_is_the_nodes_resources_and_labels() -> None:
    host = SNAPSHOTS / "nvidia-h100-8gpu"
    out = subprocess.run(
        [sys.executable, "-m", "accelkit.cli", "resources", "--host", str(host)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    node = detect_node(load_snapshot(host))
    assert json.loads(out) == {"resources": node.resources, "labels": node.labels}


def test_the_running_at_scale_guide_shows_what_the_commands_print() -> None:
    guide = (ROOT / "docs" / "running-at-scale.md").read_text()
    blocks = [b.split("\n", 1)[1] for b in guide.split("```")[1::2] if b.startswith("console")]
    assert len(blocks) >= 6
    for block in blocks:
        command, *shown = block.rstrip("\n").splitlines()
        assert command.startswith("$ accelkit "), command
        argv = shlex.split(command[len("$ accelkit ") :])
        out = subprocess.run(
            [sys.executable, "-m", "accelkit.cli", *argv],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        ).stdout
        assert out.splitlines() == shown, command
