"""Real ``distributed`` clusters on the example nodes: every worker process sees exactly the
devices of its grant, tasks submitted with resources run where those devices are, and the
workers take their devices from the node's ledger beside ``accelkit run`` (a kill -9 of a
worker or of the cluster loses no grant and leaves none behind)."""

from __future__ import annotations

import ast
import json
import os
import pwd
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import pytest
from accelkit import Node, detect_node, load_snapshot
from accelkit.ledger import Ledger
from engine_nodes import ACME_NODE, ROOT, SNAPSHOTS

pytestmark = pytest.mark.engine

distributed = pytest.importorskip("distributed")
from accelkit.integrations.dask import LocalAcceleratorCluster, worker_slots  # noqa: E402

H100 = SNAPSHOTS / "nvidia-h100-8gpu"
CLUSTER = Path(__file__).with_name("dask_cluster.py")

VARIABLES = ("CUDA_VISIBLE_DEVICES", "NEURON_RT_VISIBLE_CORES", "NEURON_RT_NUM_CORES")


def seen(*variables: str, dask_worker: object = None) -> tuple[str, dict[str, object]]:
    """In a worker (as a task, or through ``client.run``, which passes ``dask_worker``): the
    worker's name and the variables it sees (None: unset)."""
    worker = dask_worker or distributed.get_worker()
    return str(worker.name), {v: os.environ.get(v) for v in variables}  # type: ignore[attr-defined]


def snapshot(name: str, **overrides: float) -> Node:
    return detect_node(load_snapshot(SNAPSHOTS / name), overrides or None)


def run_tasks(cluster: LocalAcceleratorCluster, request: dict[str, float], *variables: str) -> dict:
    """One task per worker through ``client.submit(..., resources=request)``: what each saw."""
    with distributed.Client(cluster) as client:
        futures = [
            client.submit(seen, *variables, resources=request, pure=False) for _ in cluster.slots
        ]
        results = client.gather(futures)
        by_worker = client.run(seen, *variables)
    for name, env in results:
        assert env in [e for n, e in by_worker.values() if n == name]
    return dict(by_worker.values())


def test_h100_workers_each_see_their_own_two_gpus() -> None:
    with LocalAcceleratorCluster(
        snapshot("nvidia-h100-8gpu"), "GPU", per_worker=2, dashboard_address=None
    ) as cluster:
        assert {
            name: spec["options"]["resources"] for name, spec in cluster.worker_spec.items()
        } == {f"GPU-{n}": {"GPU": 2.0, "accelerator_type:H100": 1.0} for n in range(4)}
        envs = run_tasks(cluster, {"GPU": 2}, "CUDA_VISIBLE_DEVICES")
    assert envs == {f"GPU-{n}": {"CUDA_VISIBLE_DEVICES": f"{2 * n},{2 * n + 1}"} for n in range(4)}


def test_a_fractional_share_puts_two_workers_on_one_gpu() -> None:
    with LocalAcceleratorCluster(
        snapshot("nvidia-h100-8gpu", GPU=1), per_worker=0.5, dashboard_address=None
    ) as cluster:
        envs = run_tasks(cluster, {"GPU": 0.5}, "CUDA_VISIBLE_DEVICES")
    assert envs == {"GPU-0": {"CUDA_VISIBLE_DEVICES": "0"}, "GPU-1": {"CUDA_VISIBLE_DEVICES": "0"}}


def test_workers_on_thirds_of_a_gpu_run_tasks_asking_for_a_third() -> None:
    # The workers advertised the ledger's 0.3333, and Dask (supplied >= required) never ran a
    # task asking for 1/3 on them: it waited forever.
    with (
        LocalAcceleratorCluster(
            snapshot("nvidia-h100-8gpu", GPU=1), per_worker=1 / 3, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        assert [slot.resources["GPU"] for slot in cluster.slots] == 3 * [1 / 3]
        futures = [
            client.submit(seen, "CUDA_VISIBLE_DEVICES", resources={"GPU": 1 / 3}, pure=False)
            for _ in range(6)
        ]
        distributed.wait(futures, timeout=60)
        assert {env["CUDA_VISIBLE_DEVICES"] for _, env in client.gather(futures)} == {"0"}


def test_dask_worker_advertises_a_share_written_as_a_fraction_as_asked() -> None:
    """``accelkit dask-worker --per-worker 1/3`` reads an exact Fraction: its workers offer its
    float, what ``resources={"GPU": 1/3}`` asks, never the ledger's 0.3333 below it."""
    from accelkit.cli._common import quantity

    ledger = Ledger(None, snapshot("nvidia-h100-8gpu", GPU=1))
    slots = worker_slots(ledger, "GPU", quantity("1/3"))
    try:
        assert [slot.resources["GPU"] for slot in slots] == 3 * [1 / 3]
    finally:
        for slot in slots:
            ledger.discard(slot.grant)


@pytest.fixture
def stray_neuron_variable() -> Iterator[None]:
    """A variable the grant must unset, inherited by the process that starts the workers."""
    os.environ["NEURON_RT_NUM_CORES"] = "32"
    yield
    del os.environ["NEURON_RT_NUM_CORES"]


def test_neuron_workers_each_see_their_own_core_range(stray_neuron_variable: None) -> None:
    with LocalAcceleratorCluster(
        snapshot("neuron-trn1-32xlarge"), per_worker=8, dashboard_address=None
    ) as cluster:
        envs = run_tasks(
            cluster, {"neuron_cores": 8}, "NEURON_RT_VISIBLE_CORES", "NEURON_RT_NUM_CORES"
        )
    assert envs == {
        f"neuron_cores-{n}": {
            "NEURON_RT_VISIBLE_CORES": f"{8 * n}-{8 * n + 7}",
            "NEURON_RT_NUM_CORES": None,
        }
        for n in range(4)
    }


def test_the_cluster_refuses_what_would_break_one_worker_per_slot() -> None:
    node = snapshot("nvidia-h100-8gpu")
    with pytest.raises(TypeError, match="n_workers= cannot be given"):
        LocalAcceleratorCluster(node, n_workers=2)
    with pytest.raises(TypeError, match="give node= or ledger=, not both"):
        LocalAcceleratorCluster(node, ledger=Ledger(None, node))
    with pytest.raises(ValueError, match="no devices of resource 'TPU'; it has \\['GPU'\\]"):
        worker_slots(Ledger(None, node), "TPU")
    with pytest.raises(ValueError, match="no accelerator devices to start workers for"):
        LocalAcceleratorCluster(Node())


def test_dask_worker_verb_serves_a_third_party_family_to_a_scheduler(tmp_path: Path) -> None:
    """``accelkit dask-worker`` on the example plugin's node: two ACME workers join a running
    scheduler, each seeing one card, and stop on SIGTERM. (Its workers cannot import this test
    module, so the tasks are library functions.)"""
    log = tmp_path / "dask-worker.log"
    with (
        distributed.LocalCluster(
            n_workers=0, processes=True, dashboard_address=None, host="127.0.0.1"
        ) as cluster,
        distributed.Client(cluster) as client,
        log.open("w") as stderr,
    ):
        command = [sys.executable, "-m", "accelkit.cli", "dask-worker", cluster.scheduler_address]
        worker = subprocess.Popen([*command, "--host", str(ACME_NODE)], stderr=stderr)
        try:
            client.wait_for_workers(2, timeout=60)
            futures = [
                client.submit(os.getenv, "ACME_VISIBLE_DEVICES", resources={"ACME": 1}, pure=False)
                for _ in range(4)
            ]
            results = client.gather(futures)
            ran_on = client.who_has(futures)
            by_address = client.run(os.getenv, "ACME_VISIBLE_DEVICES")
            workers = client.scheduler_info()["workers"]
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=60)
    assert worker.returncode == 0, log.read_text()
    host = socket.gethostname()
    assert sorted((w["name"], by_address[a]) for a, w in workers.items()) == [
        (f"{host}-{worker.pid}-ACME-0", "0"),
        (f"{host}-{worker.pid}-ACME-1", "1"),
    ]
    assert [by_address[ran_on[f.key][0]] for f in futures] == results
    assert [w["resources"] for w in workers.values()] == 2 * [
        {"ACME": 1.0, "accelerator_type:ACME-Rocket-X1": 1.0}
    ]
    assert f"{host}-{worker.pid}-ACME-1: " in log.read_text()


# -- the node's ledger: beside `accelkit run`, and kill -9 of workers and clusters ----------


def accelkit(*argv: str) -> list[str]:
    """An accelkit command line (its ledger: the test's, ``$ACCELKIT_LEDGER``)."""
    return [sys.executable, "-m", "accelkit.cli", *argv]


def hold_gpus(gpus: int) -> subprocess.Popen[str]:
    """``accelkit run`` holding ``gpus`` GPUs of the H100 node until its stdin closes."""
    command = ["--", "sh", "-c", "echo held; exec cat >/dev/null"]
    run = subprocess.Popen(
        accelkit("run", "-r", f"GPU={gpus}", "--host", str(H100), *command),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert run.stdout is not None and run.stdout.readline() == "held\n", run.communicate()
    return run


def release(run: subprocess.Popen[str]) -> None:
    run.communicate(timeout=30)


@pytest.fixture
def h100_file(tmp_path: Path) -> Path:
    """The H100 node as JSON, as the cluster's process reads it."""
    path = tmp_path / "h100.json"
    path.write_text(json.dumps(snapshot("nvidia-h100-8gpu").to_dict()))
    return path


class ClusterProcess:
    """``dask_cluster.py`` in a session of its own: a LocalAcceleratorCluster over the test's
    ledger (its worker processes are in that session too, so the test can tell when all are
    gone)."""

    def __init__(self, node_file: Path, log: Path) -> None:
        self.log = log
        with log.open("w") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, str(CLUSTER), str(node_file)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                start_new_session=True,
            )
        self.pid = self.process.pid

    def workers(self, again: bool = False) -> dict[str, tuple[int, str]]:
        """``{name: [pid, CUDA_VISIBLE_DEVICES]}`` once its workers are up (``again``: asked
        anew)."""
        assert self.process.stdin is not None and self.process.stdout is not None
        if again:
            self.process.stdin.write("\n")
            self.process.stdin.flush()
        line = self.process.stdout.readline()
        assert line, self.log.read_text()[-3000:]
        return {name: (pid, seen) for name, (pid, seen) in json.loads(line).items()}

    def kill(self) -> None:
        """SIGKILL, and wait until no process of its session (its workers) is left."""
        self.process.kill()
        self.process.wait(timeout=30)
        deadline = time.monotonic() + 30
        while in_session(self.pid):
            assert time.monotonic() < deadline, f"{in_session(self.pid)} outlived the cluster"
            time.sleep(0.05)


def in_session(session: int) -> list[int]:
    """The live processes of ``session`` (proc(5) stat: state, ppid, pgrp, session)."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            stat = Path("/proc", entry, "stat").read_text()
        except (OSError, ValueError):
            continue
        state, _ppid, _group, sid = stat[stat.rfind(")") + 2 :].split()[:4]
        if int(sid) == session and state not in ("Z", "X"):
            found.append(int(entry))
    return found


def holdings(ledger: Path, node: Node) -> list[tuple[int, str]]:
    """(holder pid, GPU ids) of every live grant; no GPU held beyond its capacity."""
    used: dict[str, float] = {}
    held = []
    for holding in Ledger(ledger, node).view().holdings:
        for device, share in holding.grant.devices:
            used[device.id] = used.get(device.id, 0) + share
        held.append((holding.holder.pid, ",".join(holding.grant.ids["GPU"])))
    assert all(total <= 1 + 1e-9 for total in used.values()), used
    return sorted(held)


def test_a_cluster_takes_only_the_gpus_accelkit_run_leaves_free(
    tmp_path: Path, own_ledger: Path, h100_file: Path
) -> None:
    node = snapshot("nvidia-h100-8gpu")
    run = hold_gpus(6)
    cluster = ClusterProcess(h100_file, tmp_path / "cluster.log")
    try:
        workers = cluster.workers()
        assert sorted(seen for _pid, seen in workers.values()) == ["6", "7"]
        # `accelkit ps` lists the workers, with their user: their grants are held by the
        # process their nannies run in.
        ps = subprocess.run(accelkit("ps", "--json"), capture_output=True, text=True, check=True)
        grants = json.loads(ps.stdout)["grants"]
        assert {g["user"] for g in grants} == {pwd.getpwuid(os.getuid()).pw_name}
        listed = sorted((g["pid"], ",".join(g["ids"]["GPU"]), g["note"]) for g in grants)
        assert listed == sorted(
            [
                (run.pid, "0,1,2,3,4,5", None),
                (cluster.pid, "6", "dask worker GPU-0"),
                (cluster.pid, "7", "dask worker GPU-1"),
            ]
        )
        expected = sorted([(run.pid, "0,1,2,3,4,5"), (cluster.pid, "6"), (cluster.pid, "7")])
        # A worker killed with SIGKILL is restarted by its nanny on the same GPU, which the
        # cluster still holds for it.
        name, (pid, seen) = sorted(workers.items())[0]
        os.kill(pid, signal.SIGKILL)
        while (again := cluster.workers(again=True))[name][0] == pid:
            pass
        assert again[name][1] == seen
        assert holdings(own_ledger, node) == expected
        # The cluster killed with SIGKILL: its workers end with it, and its GPUs return.
        cluster.kill()
        assert holdings(own_ledger, node) == [(run.pid, "0,1,2,3,4,5")]
    finally:
        cluster.kill()
        release(run)
    assert holdings(own_ledger, node) == []


def test_a_cluster_with_every_gpu_held_fails_and_says_who_holds_them(own_ledger: Path) -> None:
    run = hold_gpus(8)
    try:
        with pytest.raises(RuntimeError, match=f"no accelerator device .*held by pid {run.pid}"):
            LocalAcceleratorCluster(
                ledger=Ledger(own_ledger, snapshot("nvidia-h100-8gpu")), dashboard_address=None
            )
        with distributed.LocalCluster(
            n_workers=0, dashboard_address=None, host="127.0.0.1"
        ) as scheduler:
            verb = subprocess.run(
                accelkit("dask-worker", scheduler.scheduler_address, "--host", str(H100)),
                capture_output=True,
                text=True,
                timeout=60,
            )
    finally:
        release(run)
    assert verb.returncode == 75, verb.stderr
    assert f"GPU 0,1,2,3,4,5,6,7 held by pid {run.pid}" in verb.stderr


@pytest.mark.usefixtures("only_our_plugins")  # every line said is pinned
def test_dask_worker_says_in_one_line_when_no_scheduler_answers(own_ledger: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as closed:
        address = f"tcp://127.0.0.1:{closed.getsockname()[1]}"
    verb = subprocess.run(
        accelkit("dask-worker", address, "--host", str(H100)),
        capture_output=True,
        text=True,
        timeout=20,  # distributed alone gives up after 30 s, with an "internal error"
    )
    assert verb.returncode == 2
    assert verb.stderr.splitlines() == [
        f"accelkit dask-worker: error: no Dask scheduler answers at {address} (Connection "
        "refused): start `dask scheduler` there first, or give the address it prints"
    ]
    assert not own_ledger.exists() or holdings(own_ledger, snapshot("nvidia-h100-8gpu")) == []


@pytest.mark.usefixtures("only_our_plugins")  # every line said is pinned
def test_dask_worker_says_in_one_line_when_what_answers_is_not_a_scheduler() -> None:
    """The dashboard's port, say: an HTTP server answers distributed's handshake."""
    with socket.create_server(("127.0.0.1", 0)) as web:

        def answer() -> None:
            with suppress(OSError):  # the listening socket closed: the test is over
                while True:
                    connection, _peer = web.accept()
                    with connection, suppress(OSError):
                        connection.recv(64)
                        connection.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

        threading.Thread(target=answer, daemon=True).start()
        address = f"tcp://127.0.0.1:{web.getsockname()[1]}"
        verb = subprocess.run(
            accelkit("dask-worker", address, "--host", str(H100)),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert verb.returncode == 2
    assert verb.stderr.splitlines() == [
        f"accelkit dask-worker: error: {address} answers, but not as a Dask scheduler (it does "
        "not speak Dask's protocol): give the address `dask scheduler` prints (its port, 8786 by "
        "default; not the dashboard's)"
    ]


@pytest.mark.usefixtures("only_our_plugins")  # every line said is pinned
@pytest.mark.parametrize(
    ("options", "error"),
    [
        (
            ["--per-worker", "0"],
            "per_worker 0 gives a worker no device: ask for a fraction from 0.0001 to 1, or a "
            "whole number of devices per worker",
        ),
        (
            ["--per-worker", "-1"],
            "per_worker -1 gives a worker no device: ask for a fraction from 0.0001 to 1, or a "
            "whole number of devices per worker",
        ),
        (
            ["--per-worker", "1.5"],
            "per_worker 1.5 is above 1 and not whole: ask for a whole number (1 or 2), or a "
            "fraction below 1",
        ),
        (["--resource", "GPX"], "this node has no devices of resource 'GPX'; it has ['GPU']"),
    ],
)
def test_dask_worker_checks_its_request_before_asking_the_scheduler(
    options: list[str], error: str, own_ledger: Path
) -> None:
    """A typo in --per-worker or --resource is said as such, although no scheduler answers
    (``--per-worker 0`` was a KeyError; the others were reported as "no Dask scheduler")."""
    with socket.create_server(("127.0.0.1", 0)) as closed:
        address = f"tcp://127.0.0.1:{closed.getsockname()[1]}"
    verb = subprocess.run(
        accelkit("dask-worker", address, "--host", str(H100), *options),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (verb.returncode, verb.stderr.splitlines()) == (
        2,
        [f"accelkit dask-worker: error: {error}"],
    )
    assert not own_ledger.exists() or holdings(own_ledger, snapshot("nvidia-h100-8gpu")) == []


@pytest.fixture
def node_without_devices(tmp_path: Path) -> Path:
    """A snapshot of a machine with no accelerators, whatever this one has."""
    from accelkit import FakeHost
    from accelkit.node import record_snapshot

    return record_snapshot(tmp_path / "no-devices", FakeHost())


@pytest.mark.usefixtures("only_our_plugins")  # every line said is pinned
@pytest.mark.parametrize(
    ("options", "code", "said"),
    [
        ([], 0, "accelkit dask-worker: this node has no accelerators to serve"),
        (
            ["--resource", "GPU"],
            2,
            "accelkit dask-worker: error: this node has no devices of resource 'GPU'; it has none",
        ),
        (
            ["--per-worker", "0.5"],
            2,
            "accelkit dask-worker: error: this node has no accelerator devices: no worker can "
            "hold 0.5 of one",
        ),
        (
            ["--per-worker", "0"],
            2,
            "accelkit dask-worker: error: per_worker 0 gives a worker no device: ask for a "
            "fraction from 0.0001 to 1, or a whole number of devices per worker",
        ),
    ],
    ids=["nothing-asked", "resource", "share", "no-share"],
)
def test_dask_worker_on_a_node_without_devices_checks_what_it_was_asked(
    node_without_devices: Path,
    options: list[str],
    code: int,
    said: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # `--resource GPU` on a node with no devices exited 0, as if nothing had been asked, where
    # the guide promises exit status 2 for a resource the node lacks.
    from accelkit.cli import main

    address = "tcp://127.0.0.1:9"  # never reached: the request is checked first
    assert main(["dask-worker", address, "--host", str(node_without_devices), *options]) == code
    assert capsys.readouterr().err.splitlines() == [said]


def test_a_second_dask_worker_on_the_node_joins_beside_the_first(tmp_path: Path) -> None:
    """`accelkit run` holds GPUs 0-3, worker A takes 4-7, the run ends, worker B takes 0-3:
    both join the scheduler, their names apart (B's were A's and the scheduler refused them)."""
    run = hold_gpus(4)
    verbs = []
    with (
        distributed.LocalCluster(
            n_workers=0, processes=True, dashboard_address=None, host="127.0.0.1"
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        command = accelkit("dask-worker", cluster.scheduler_address, "--host", str(H100))
        try:
            for number, waits_for in enumerate((1, 2)):
                with (tmp_path / f"{number}.log").open("w") as stderr:
                    verbs.append(subprocess.Popen([*command, "--per-worker", "4"], stderr=stderr))
                client.wait_for_workers(waits_for, timeout=60)
                release(run)
            seen = client.run(os.getenv, "CUDA_VISIBLE_DEVICES")
            names = {w["name"]: seen[a] for a, w in client.scheduler_info()["workers"].items()}
        finally:
            for verb in verbs:
                verb.send_signal(signal.SIGTERM)
                verb.wait(timeout=60)
    host = socket.gethostname()
    assert names == {
        f"{host}-{verbs[0].pid}-GPU-0": "4,5,6,7",
        f"{host}-{verbs[1].pid}-GPU-0": "0,1,2,3",
    }
    assert [v.returncode for v in verbs] == [0, 0], (tmp_path / "1.log").read_text()[-3000:]


def test_dask_worker_says_in_one_line_when_the_scheduler_has_its_worker_names(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], own_ledger: Path
) -> None:
    """A worker the scheduler still lists under a name this process would give (a former
    process of the same pid): one line, exit status 2, no grant kept (it was tracebacks)."""
    from accelkit.cli import _dask_worker, main

    monkeypatch.setattr(_dask_worker, "worker_prefix", lambda: "node7-41-")
    with distributed.LocalCluster(
        n_workers=0, processes=True, dashboard_address=None, host="127.0.0.1"
    ) as cluster:
        (spec,) = cluster.new_worker_spec().values()
        cluster.worker_spec["node7-41-GPU-0"] = spec
        cluster.scale(1)
        with distributed.Client(cluster) as client:
            client.wait_for_workers(1, timeout=60)
        code = main(["dask-worker", cluster.scheduler_address, "--host", str(H100)])
    assert (code, capsys.readouterr().err.splitlines()) == (
        2,
        [
            f"accelkit dask-worker: error: the scheduler at {cluster.scheduler_address} already "
            "has workers named node7-41-GPU-0, as this process would name its own: stop those "
            "workers, or wait until the scheduler drops them, and start again"
        ],
    )
    assert not own_ledger.exists() or holdings(own_ledger, snapshot("nvidia-h100-8gpu")) == []


def test_kill_9_of_workers_and_clusters_loses_no_grant_and_leaves_none(
    tmp_path: Path, own_ledger: Path, h100_file: Path
) -> None:
    """Clusters killed at random moments (while taking their GPUs, starting their workers, or
    serving), one after a worker of it was killed and is being restarted: at every look no GPU
    is over capacity, every grant is `accelkit run`'s or the live cluster's, and the workers
    use only GPUs their cluster holds; after each kill the cluster's workers end and its GPUs
    return."""
    node = snapshot("nvidia-h100-8gpu")
    chance = random.Random(19)
    run = hold_gpus(6)
    try:
        for round_ in range(3):
            cluster = ClusterProcess(h100_file, tmp_path / f"cluster{round_}.log")
            try:
                if round_ == 1:
                    workers = cluster.workers()
                    held = [ids for pid, ids in holdings(own_ledger, node) if pid == cluster.pid]
                    assert held == sorted(seen for _pid, seen in workers.values())
                    os.kill(min(pid for pid, _seen in workers.values()), signal.SIGKILL)
                time.sleep(chance.uniform(0, 1.5))
                assert {pid for pid, _ids in holdings(own_ledger, node)} <= {run.pid, cluster.pid}
            finally:
                cluster.kill()
            assert holdings(own_ledger, node) == [(run.pid, "0,1,2,3,4,5")]
    finally:
        release(run)
    everything = Ledger(own_ledger, node).acquire({"GPU": 8})  # nothing lost
    assert everything is not None


def test_the_guides_dask_example_runs_as_written(tmp_path: Path) -> None:
    """docs/running-at-scale.md's LocalAcceleratorCluster script, run as a user would (on a
    machine shown two GPUs by the operator's override, with the test's ledger)."""
    guide = (ROOT / "docs" / "running-at-scale.md").read_text()
    blocks = [b.split("\n", 1)[1] for b in guide.split("```")[1::2] if b.startswith("python")]
    script = tmp_path / "train.py"
    script.write_text(next(b for b in blocks if "LocalAcceleratorCluster(" in b))
    ran = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "ACCELKIT_OVERRIDE_RESOURCES": '{"GPU": 2}'},
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    results = ast.literal_eval(ran.stdout.strip().splitlines()[-1])
    assert [shard for shard, _gpu in results] == list(range(32))
    assert len({gpu for _shard, gpu in results}) == 2  # each worker its own GPU


SLOTS_IN_A_GRANT = """
import json, sys
from accelkit import Node
from accelkit.integrations.dask import worker_slots
from accelkit.ledger import Ledger
slots = worker_slots(Ledger(None, Node.from_dict(json.load(open(sys.argv[1])))))
print(json.dumps({s.name: s.env["CUDA_VISIBLE_DEVICES"] for s in slots}))
"""


def test_workers_started_on_a_grant_take_steps_of_it_and_only_its_families(
    tmp_path: Path,
) -> None:
    """A cluster inside `accelkit run -r GPU=2` on a node of GPUs and NPUs: a worker per GPU
    of the grant, and none for the NPUs, which the grant does not hold."""
    mixed = SNAPSHOTS / "mixed-nvidia-ascend"
    node_file = tmp_path / "mixed.json"
    node_file.write_text(json.dumps(detect_node(load_snapshot(mixed)).to_dict()))
    inside = [sys.executable, "-c", SLOTS_IN_A_GRANT, str(node_file)]
    run = subprocess.run(
        accelkit("run", "-r", "GPU=2", "--host", str(mixed), "--", *inside),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == {"GPU-0": "0", "GPU-1": "1"}


def test_every_resource_a_node_serves_is_one_that_can_give_the_share() -> None:
    # a GPU takes halves, a Neuron core does not: half a device serves GPU workers alone
    from accelkit.integrations.dask import served_resources

    gpus, cores = (
        snapshot(name).to_dict() for name in ("nvidia-h100-8gpu", "neuron-trn1-32xlarge")
    )
    merged = {**gpus, "devices": gpus["devices"] + cores["devices"]}
    for key in ("resources", "families", "detected", "labels"):
        merged[key] = {**gpus[key], **cores[key]}
    node = Node.from_dict(merged)
    assert served_resources(node, None, 0.5) == ["GPU"]
    assert served_resources(node, None, 1) == ["GPU", "neuron_cores"]


def test_a_worker_name_clash_compares_whole_names() -> None:
    # host "w" of pid 1 (a container's entrypoint) names its workers w-1-GPU-0...; host "w-1"
    # of pid 4242 names them w-1-4242-GPU-0...: no clash
    from accelkit.cli._dask_worker import _check_names_free

    _check_names_free("tcp://s:8786", "w-1-", ["GPU"], ["w-1-4242-GPU-0", "w-1-GPU-x"])
    with pytest.raises(ValueError, match="already has workers named w-1-GPU-3"):
        _check_names_free("tcp://s:8786", "w-1-", ["GPU"], ["w-1-GPU-3"])
