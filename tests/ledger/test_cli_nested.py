"""One ledger for every path of a node: a run inside a grant takes a step of it, a shell that sees
four GPUs meets the unrestricted holders in the same ledger, a request for no device hides them
all, and a kill -9 of jobs and their steps at any moment leaves nothing lost or phantom."""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from accelkit import load_snapshot
from accelkit.cli._run import EXIT_BUSY
from accelkit.ledger._ledger import Ledger
from accelkit.ledger._location import GRANT_VAR, LEDGER_VAR
from ledger_support import H100, accelkit, run, start

STEP = 'echo "$CUDA_VISIBLE_DEVICES"; while [ ! -e "$0/go" ]; do sleep 0.02; done'
"""A step's command: print what it sees, then hold its step until the file go exists."""


@pytest.fixture
def four_of_eight(tmp_path: Path) -> Iterator[str]:
    """The H100 node recorded in a shell with ``CUDA_VISIBLE_DEVICES=0,1,2,3``."""
    snapshot = tmp_path / "four-of-eight"
    shutil.copytree(H100, snapshot)
    manifest = json.loads((snapshot / "snapshot.json").read_text())
    manifest["env"]["CUDA_VISIBLE_DEVICES"] = "0,1,2,3"
    (snapshot / "snapshot.json").write_text(json.dumps(manifest))
    yield str(snapshot)


def test_a_run_inside_a_grant_takes_a_step_of_it(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.json"
    inner = [sys.executable, "-m", "accelkit.cli", "run", "-r", "GPU=1", "--host", H100, "--"]
    job = 'echo "$CUDA_VISIBLE_DEVICES"; "$@"'
    outer = start(
        ledger, "run", "-r", "GPU=2", "--host", H100, "--", "sh", "-c", job, "sh",
        *inner, "sh", "-c", STEP, str(tmp_path),
    )  # fmt: skip
    assert outer.stdout is not None
    outer_ids = outer.stdout.readline().split()[0].split(",")
    step_ids = outer.stdout.readline().strip()
    assert len(outer_ids) == 2 and step_ids in outer_ids
    listing = json.loads(run(ledger, "ps", "--json").stdout)
    [grant, step] = listing["grants"]
    assert grant["parent"] is None and step["parent"] == grant["token"]
    assert step["ids"] == {"GPU": [step_ids]} and step["pid"] != outer.pid
    table = run(ledger, "ps").stdout.splitlines()
    assert table[2].startswith(str(outer.pid)) and table[3].startswith(f"\\_ {step['pid']}")
    # Any process carrying the grant's variable takes steps of it: the other GPU of the two,
    # then nothing (though six GPUs of the node are free), and never more than the grant has.
    inside = {**os.environ, GRANT_VAR: f"{grant['token']}@{ledger}"}
    show = ["--", "sh", "-c", 'echo "$CUDA_VISIBLE_DEVICES"']
    other = run(ledger, "run", "-r", "GPU=1", "--host", H100, *show, env=inside)
    assert other.returncode == 0 and other.stdout.split() == [i for i in outer_ids if i != step_ids]
    assert f"a step of grant {grant['token']}" in other.stderr
    holder = start(
        ledger, "run", "-r", "GPU=1", "--host", H100, "--", "sh", "-c", STEP, str(tmp_path),
        env=inside,
    )  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline().strip() in outer_ids
    busy = run(ledger, "run", "-r", "GPU=1", "--host", H100, "--", "true", env=inside)
    assert busy.returncode == EXIT_BUSY
    # What holds a step back is the grant's other steps, not the grant it is part of.
    assert f"held by pid {holder.pid} (" in busy.stderr, busy.stderr
    assert f"held by pid {step['pid']} (" in busy.stderr, busy.stderr
    assert f"pid {outer.pid} " not in busy.stderr, busy.stderr
    never = run(ledger, "run", "-r", "GPU=3", "--host", H100, "--", "true", env=inside)
    assert never.returncode == 2
    assert f"GPU=3 can never fit in grant {grant['token']} (GPU {','.join(outer_ids)})" in (
        never.stderr
    )
    (tmp_path / "go").touch()
    assert outer.wait(timeout=60) == 0 and holder.wait(timeout=60) == 0
    assert Ledger(ledger).grants() == []


def test_a_run_inside_a_run_with_an_override_takes_a_step_of_it(tmp_path: Path) -> None:
    """``--override`` reached no further than its own run: the command's ``accelkit run``
    detected the node without it, met "another node" in the ledger, and was refused. The
    command gets the override as the node's configuration, beside the operator's."""
    ledger = tmp_path / "ledger.json"
    inner = [sys.executable, "-m", "accelkit.cli", "run", "-r", "GPU=1", "--host", H100, "--"]
    job = 'echo "$ACCELKIT_OVERRIDE_RESOURCES"; exec "$@"'
    show = ["sh", "-c", 'echo "$CUDA_VISIBLE_DEVICES"']
    outer = run(
        ledger, "run", "-r", "GPU=2", "--host", H100, "--override", "GPU=10",
        "--override", "scratch_disk=1/2", "--", "sh", "-c", job, "sh", *inner, *show,
        env={**os.environ, "ACCELKIT_OVERRIDE_RESOURCES": '{"licenses": 3}'},
    )  # fmt: skip
    assert outer.returncode == 0, outer.stderr
    configured, step = outer.stdout.splitlines()
    assert json.loads(configured) == {"licenses": 3, "GPU": 10, "scratch_disk": 0.5}
    assert step in ("0", "1") and "a step of grant" in outer.stderr


def test_a_shell_that_sees_four_gpus_shares_the_ledger_with_unrestricted_holders(
    tmp_path: Path, four_of_eight: str
) -> None:
    ledger = tmp_path / "ledger.json"
    shell = {**os.environ, "CUDA_VISIBLE_DEVICES": "0,1,2,3"}
    hold = ["--", "sh", "-c", STEP, str(tmp_path)]
    first = start(ledger, "run", "-r", "GPU=2", "--host", H100, *hold)
    assert first.stdout is not None and first.stdout.readline().strip() == "0,1"
    seen = start(ledger, "run", "-r", "GPU=2", "--host", four_of_eight, *hold, env=shell)
    assert seen.stdout is not None and seen.stdout.readline().strip() == "2,3"
    # It sees GPUs 0-3 only: every one of them is held now, though 4-7 are free.
    busy = run(ledger, "run", "-r", "GPU=1", "--host", four_of_eight, "--", "true", env=shell)
    assert busy.returncode == EXIT_BUSY, busy.stderr
    never = run(ledger, "run", "-r", "GPU=5", "--host", four_of_eight, "--", "true", env=shell)
    assert never.returncode == 2
    assert "can never fit in the devices this process sees (GPU 0,1,2,3" in never.stderr
    show = ["--", "sh", "-c", 'echo "$CUDA_VISIBLE_DEVICES"']
    rest = run(ledger, "run", "-r", "GPU=4", "--host", H100, *show)
    assert rest.returncode == 0 and rest.stdout.strip() == "4,5,6,7"
    listing = json.loads(run(ledger, "ps", "--json").stdout)
    assert [g["ids"]["GPU"] for g in listing["grants"]] == [["0", "1"], ["2", "3"]]
    (tmp_path / "go").touch()
    assert first.wait(timeout=60) == 0 and seen.wait(timeout=60) == 0


@pytest.mark.parametrize("request_", [["-r", "GPU=0"], ["-r", "accelerator_type=H100"]])
def test_a_run_that_asks_for_no_device_sees_none(tmp_path: Path, request_: list[str]) -> None:
    show = ["--", "sh", "-c", 'echo "[${CUDA_VISIBLE_DEVICES-unset}]"']
    seen = run(tmp_path / "ledger.json", "run", *request_, "--host", H100, *show)
    assert seen.returncode == 0 and seen.stdout == "[]\n", seen
    assert "took no device (the command sees none of this node's: nvidia)" in seen.stderr


NOSET_SAID = (
    "ACCELKIT_NOSET_NVIDIA set: {reader} sees the devices of nvidia that its inherited variables "
    "show, not the grant's (unset ACCELKIT_NOSET_NVIDIA for the grant's)"
)


@pytest.mark.parametrize(("request_", "took"), [("GPU=0", "no device"), ("GPU=1", "GPU 0")])
def test_run_and_env_say_that_noset_leaves_the_inherited_devices_seen(
    tmp_path: Path, request_: str, took: str
) -> None:
    """With ``ACCELKIT_NOSET_NVIDIA=1`` nothing hides or picks the GPUs: the command sees what
    the variables it inherits show (here: unset, every GPU). It said it "sees none"."""
    noset = {**os.environ, "ACCELKIT_NOSET_NVIDIA": "1"}
    show = ["--", "sh", "-c", 'echo "[${CUDA_VISIBLE_DEVICES-unset}]"']
    seen = run(tmp_path / "ledger.json", "run", "-r", request_, "--host", H100, *show, env=noset)
    assert seen.returncode == 0 and seen.stdout == "[unset]\n", seen
    said = NOSET_SAID.format(reader="the command")
    assert f"accelkit run: took {took}; {said}\n" == seen.stderr
    env = run(tmp_path / "ledger.json", "env", "-r", request_, "--host", H100, env=noset)
    assert env.returncode == 0 and env.stdout == "", env
    assert f"accelkit env: {NOSET_SAID.format(reader='this shell')}" in env.stderr.splitlines()


def test_does_not_fit_lists_a_grant_once_not_its_steps_share_again(tmp_path: Path) -> None:
    """A step's 0.25 lies inside its grant's 0.5: the message said both, as if 0.75 were held."""
    ledger = tmp_path / "ledger.json"
    inner = [sys.executable, "-m", "accelkit.cli", "run", "-r", "GPU=0.25", "--host", H100, "--"]
    outer = start(
        ledger, "run", "-r", "GPU=0.5", "--host", H100, "--", *inner, "sh", "-c", STEP,
        str(tmp_path),
    )  # fmt: skip
    assert outer.stdout is not None and outer.stdout.readline().strip() == "0"
    busy = run(ledger, "run", "-r", "GPU=8", "--host", H100, "--", "true")
    (tmp_path / "go").touch()
    assert outer.wait(timeout=60) == 0
    assert busy.returncode == EXIT_BUSY
    assert busy.stderr.startswith(
        f"accelkit run: GPU=8 does not fit now (GPU 0 (0.5) held by pid {outer.pid} ("
    )
    assert busy.stderr.endswith(" (1 step inside)); use --wait to queue\n"), busy.stderr
    assert "0.25" not in busy.stderr.replace("GPU=0.25", "")


def test_a_relative_ledger_is_refused(tmp_path: Path) -> None:
    argv = accelkit(Path("ledger.json"), "run", "-r", "GPU=1", "--host", H100, "--", "true")
    relative = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert relative.returncode == 2 and not (tmp_path / "ledger.json").exists()
    assert "the ledger path 'ledger.json' is a relative path" in relative.stderr
    assert "give an absolute path" in relative.stderr
    argv = accelkit(tmp_path / "ledger.json", "ps")
    argv.remove("--ledger")
    argv.remove(str(tmp_path / "ledger.json"))
    env = {**os.environ, LEDGER_VAR: "shared/ledger.json"}
    listed = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert listed.returncode == 2
    assert f"{LEDGER_VAR}='shared/ledger.json' is a relative path" in listed.stderr


def test_kill_9_of_jobs_and_their_steps_leaves_no_lost_or_phantom_grant(tmp_path: Path) -> None:
    """Jobs (``accelkit run`` of a shell) run two steps each (``accelkit run`` inside); processes
    of jobs and steps are killed at random moments, the job's own holder among them while its
    steps hold grants, and after every kill the ledger holds no device beyond its capacity, no
    step beyond its grant, and only grants of running processes."""
    ledger = tmp_path / "ledger.json"
    chance = random.Random(7)
    steps = '"$@" & "$@" & wait'
    jobs: list[subprocess.Popen[str]] = []
    for _ in range(6):
        outer, inner = chance.choice([("1", "0.5"), ("2", "1"), ("4", "2")])
        step = [sys.executable, "-m", "accelkit.cli", "run", "-r", f"GPU={inner}", "--wait"]
        jobs.append(
            start(
                ledger, "run", "-r", f"GPU={outer}", "--wait", "--host", H100, "--",
                "sh", "-c", steps, "sh", *step, "--host", H100, "--", "sleep", "120",
                start_new_session=True,
            )
        )  # fmt: skip
    view = Ledger(ledger, host=load_snapshot(H100))
    sessions = {job.pid for job in jobs}
    orphaned = _kill_a_job_holding_steps(view, sessions)
    audit(view, sessions)
    promoted = [h for h in view.view().holdings if h.holder.pid in orphaned]
    assert promoted and all(h.parent is None for h in promoted)  # the node counts them now
    for job in chance.sample(jobs, len(jobs)):
        members = _session(job.pid)
        if members:
            time.sleep(chance.uniform(0, 0.3))  # before, during or after a decision
            os.kill(chance.choice(members), signal.SIGKILL)
        audit(view, sessions)
    for job in jobs:
        with contextlib.suppress(ProcessLookupError):  # the whole job may have ended already
            os.killpg(job.pid, signal.SIGKILL)
        job.wait(timeout=60)
    _wait_until(lambda: not any(_session(s) for s in sessions))
    audit(view, set())
    assert view.view().waiting == () and view.acquire({"GPU": 8}) is not None


def audit(ledger: Ledger, sessions: set[int]) -> None:
    """No device over capacity, no step beyond its grant, every holder a live process of one of
    ``sessions`` (the jobs' process groups; a step outlives its job in it)."""
    holdings = ledger.view().holdings
    alive = {pid for session in sessions for pid in _session(session)}
    by_token = {h.grant.token: h for h in holdings}
    used: dict[tuple[object, str], float] = {}
    for holding in holdings:
        assert holding.holder.pid in alive or not holding.holder.alive(), holding
        assert holding.parent is None or holding.parent in by_token, holding
        for device, share in holding.grant.devices:
            key = (holding.parent, device.id)
            used[key] = used.get(key, 0) + share
    for (parent, device_id), total in used.items():
        if parent is None:
            room = 1.0
        else:
            room = sum(s for d, s in by_token[parent].grant.devices if d.id == device_id)  # type: ignore[index]
        assert total <= room + 1e-9, (parent, device_id, total, room)


def _kill_a_job_holding_steps(ledger: Ledger, sessions: set[int]) -> set[int]:
    """Kill the holder of a job grant once steps of it hold; the pids of those steps."""
    deadline = time.monotonic() + 60
    while True:
        holdings = ledger.view().holdings
        for grant in (h for h in holdings if h.parent is None and h.holder.pid in sessions):
            steps = {h.holder.pid for h in holdings if h.parent == grant.grant.token}
            if steps:
                os.kill(grant.holder.pid, signal.SIGKILL)
                _wait_until(lambda gone=grant.holder: not gone.alive())
                return steps
        assert time.monotonic() < deadline, "no job ever held a step"
        time.sleep(0.02)


def _session(session: int) -> list[int]:
    """The live processes of one process session (a job and everything it started)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if int(fields[3]) == session and fields[0] not in (b"Z", b"X"):
            members.append(int(entry.name))
    return members


def _wait_until(condition: object, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)
