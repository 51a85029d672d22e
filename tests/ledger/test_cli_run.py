"""`accelkit run` and `accelkit ps` on an example node: concurrent runs, waiting, exit codes, and
a kill -9 audit."""

from __future__ import annotations

import json
import os
import pwd
import random
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest
from accelkit import Node
from accelkit.cli._run import EXIT_BUSY, EXIT_CANNOT_EXECUTE, EXIT_NOT_FOUND, EXIT_TIMED_OUT
from accelkit.ledger._ledger import Ledger
from ledger_support import H100, ROOT, accelkit, run, start

GATED = (
    'echo $CUDA_VISIBLE_DEVICES; while [ ! -e "$0/go$CUDA_VISIBLE_DEVICES" ]; do sleep 0.02; done'
)
"""Print the granted GPU, then hold it until the test creates the file go<id>."""


def gated(ledger: Path, gates: Path, *options: str) -> subprocess.Popen[str]:
    return start(
        ledger, "run", "-r", "GPU=1", "--host", H100, *options, "--", "sh", "-c", GATED, str(gates)
    )


def hold_everything(ledger: Path, gates: Path) -> subprocess.Popen[str]:
    """A run holding all eight GPUs until the file ``go`` exists, once it holds them."""
    script = 'echo; while [ ! -e "$0/go" ]; do sleep 0.02; done'
    holder = start(
        ledger, "run", "-r", "GPU=8", "--host", H100, "--", "sh", "-c", script, str(gates)
    )
    holder.stdout.readline()  # type: ignore[union-attr]
    return holder


def test_eight_runs_hold_eight_gpus_and_a_ninth_waits_its_turn(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.json"
    runs = [gated(ledger, tmp_path) for _ in range(8)]
    ids = [p.stdout.readline().strip() for p in runs]  # type: ignore[union-attr]
    # All eight hold their GPU at once (none has been let go): eight different ids.
    assert sorted(ids, key=int) == [str(i) for i in range(8)]
    busy = run(ledger, "run", "-r", "GPU=1", "--host", H100, "--", "true")
    assert busy.returncode == EXIT_BUSY
    assert "GPU=1 does not fit now" in busy.stderr and "use --wait" in busy.stderr
    ninth = gated(ledger, tmp_path, "--wait")
    waiting = ninth.stderr.readline()  # type: ignore[union-attr]
    assert waiting.startswith("accelkit run: waiting for GPU=1: GPU") and "held by pid" in waiting
    (tmp_path / "go3").touch()  # the run holding GPU 3 ends; the ninth takes GPU 3
    assert ninth.stdout.readline().strip() == "3"  # type: ignore[union-attr]
    for i in range(8):
        (tmp_path / f"go{i}").touch()
    for process in [*runs, ninth]:
        assert process.wait(timeout=60) == 0
    assert Ledger(ledger).grants() == []


def test_the_holder_is_the_command_and_its_exit_status_is_returned(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.json"
    script = 'echo $$; while [ ! -e "$0/go" ]; do sleep 0.02; done; exit 7'
    process = start(
        ledger, "run", "-r", "GPU=0.5", "--host", H100, "--", "sh", "-c", script, str(tmp_path)
    )
    assert process.stdout.readline().strip() == str(process.pid)  # type: ignore[union-attr]
    listing = json.loads(run(ledger, "ps", "--json").stdout)
    assert [(g["pid"], g["ids"]) for g in listing["grants"]] == [(process.pid, {"GPU": ["0"]})]
    assert listing["grants"][0]["command"].startswith("sh -c")
    table = run(ledger, "ps").stdout.splitlines()
    assert table[1].split()[:4] == ["PID", "USER", "AGE", "HOLDS"] and f"{process.pid}" in table[2]
    assert table[2].split()[1] == pwd.getpwuid(os.getuid()).pw_name
    assert "GPU 0 (0.5)" in table[2]
    (tmp_path / "go").touch()
    assert process.wait(timeout=60) == 7
    assert "took GPU 0 (0.5)" in process.stderr.read()  # type: ignore[union-attr]
    assert json.loads(run(ledger, "ps", "--json").stdout)["grants"] == []


def test_the_command_sees_its_grant_and_with_hide_others_nothing_else(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.json"
    mixed = str(ROOT / "examples" / "nodes" / "mixed-nvidia-ascend")
    show = 'echo "$CUDA_VISIBLE_DEVICES $CUDA_DEVICE_ORDER ${ASCEND_RT_VISIBLE_DEVICES-unset}"'
    for option, ascend in (("--hide-others", ""), ("--wait", "unset")):
        seen = run(ledger, "run", "-r", "GPU=1", option, "--host", mixed, "--", "sh", "-c", show)
        assert seen.stdout.split(" ") == ["0", "PCI_BUS_ID", f"{ascend}\n"], seen


def test_a_resource_asked_for_zero_hides_its_families_and_leaves_the_others(
    tmp_path: Path,
) -> None:
    # As Ray gives a task that asks for no GPU no GPU: -r GPU=0 beside -r NPU=1 hides the
    # NVIDIA GPUs (they were left visible: the grant holds no record of a zero request).
    ledger = tmp_path / "ledger.json"
    mixed = str(ROOT / "examples" / "nodes" / "mixed-nvidia-ascend")
    show = 'echo "${CUDA_VISIBLE_DEVICES-unset} ${ASCEND_RT_VISIBLE_DEVICES-unset}"'
    shell = {k: v for k, v in os.environ.items() if "VISIBLE" not in k and "NOSET" not in k}
    both = ("run", "-r", "GPU=0", "-r", "NPU=1", "--host", mixed, "--", "sh", "-c", show)
    seen = run(ledger, *both, env=shell)
    assert seen.stdout == " 0\n", seen
    assert "took NPU 0 (the command sees no device of: nvidia)" in seen.stderr
    alone = run(ledger, "run", "-r", "NPU=1", "--host", mixed, "--", "sh", "-c", show, env=shell)
    assert alone.stdout == "unset 0\n" and "sees no device" not in alone.stderr, alone
    left = run(ledger, *both, env={**shell, "ACCELKIT_NOSET_NVIDIA": "1"})
    assert left.stdout == "unset 0\n", left
    assert "ACCELKIT_NOSET_NVIDIA set" in left.stderr and "sees no device" not in left.stderr


@pytest.mark.parametrize(
    "requests",
    [["GPU=0", "NPU=1"], ["GPU=0"], ["accelerator_type=A10"], ["NPU=1"]],
    ids=lambda r: "+".join(r),
)
def test_env_gives_the_environment_run_gives_its_command(
    tmp_path: Path, requests: list[str]
) -> None:
    """``accelkit env -r GPU=0 -r NPU=1`` left the GPUs visible (and ``-r GPU=0`` hid nothing),
    where ``accelkit run`` hides them: an ``eval`` of env's lines gives the shell what run gives
    its command."""
    ledger = tmp_path / "ledger.json"
    mixed = str(ROOT / "examples" / "nodes" / "mixed-nvidia-ascend")
    shell = {k: v for k, v in os.environ.items() if "VISIBLE" not in k and "NOSET" not in k}
    words = [word for request in requests for word in ("-r", request)]
    names = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "ASCEND_RT_VISIBLE_DEVICES")
    show = " ".join(f'"${{{name}-unset}}"' for name in names)
    ran = run(ledger, "run", *words, "--host", mixed, "--", "sh", "-c", f"echo {show}", env=shell)
    script = f'out=$({shlex.join(accelkit(ledger, "env", *words, "--host", mixed))}) && eval "$out"'
    evaluated = subprocess.run(
        ["sh", "-c", f"{script} && echo {show}"], capture_output=True, text=True, env=shell
    )
    assert ran.returncode == 0 and evaluated.returncode == 0, (ran.stderr, evaluated.stderr)
    assert evaluated.stdout == ran.stdout
    if "GPU=0" in requests:
        assert ran.stdout.split(" ")[0] == ""  # CUDA_VISIBLE_DEVICES set, and empty


def test_the_command_gets_the_signals_python_ignores_back_at_their_default(
    tmp_path: Path,
) -> None:
    """Python ignores SIGPIPE and SIGXFSZ, and exec keeps what is ignored: the command must not
    inherit that, or ``yes | head`` under accelkit run fails with EPIPE instead of ending."""
    ledger = tmp_path / "ledger.json"
    show = "grep SigIgn /proc/$$/status; yes | head -n 1 >/dev/null; echo ${PIPESTATUS-}"
    seen = run(ledger, "run", "-r", "GPU=1", "--host", H100, "--", "bash", "-c", show)
    ignored = int(seen.stdout.split()[1], 16)
    for number in (signal.SIGPIPE, signal.SIGXFSZ):
        assert not ignored & 1 << (number - 1), f"{number.name} is ignored in the command"
    assert seen.stdout.split()[2] == "141"  # yes ended by SIGPIPE (128 + 13), as in a shell
    assert "Broken pipe" not in seen.stderr


def test_a_request_refused_for_the_queue_says_who_waits_ahead(tmp_path: Path) -> None:
    """GPU 7 is free, but a request for all eight came first: the refusal names that waiter,
    or the user cannot tell why a free GPU was not given."""
    ledger = tmp_path / "ledger.json"
    script = 'echo; while [ ! -e "$0/go" ]; do sleep 0.02; done'
    holder = start(
        ledger, "run", "-r", "GPU=7", "--host", H100, "--", "sh", "-c", script, str(tmp_path)
    )
    holder.stdout.readline()  # type: ignore[union-attr]
    waiter = start(ledger, "run", "-r", "GPU=8", "--wait", "--host", H100, "--", "true")
    waiter.stderr.readline()  # type: ignore[union-attr]
    busy = run(ledger, "run", "-r", "GPU=1", "--host", H100, "--", "true")
    (tmp_path / "go").touch()
    assert holder.wait(timeout=60) == 0 and waiter.wait(timeout=60) == 0
    assert busy.returncode == EXIT_BUSY
    assert f"held by pid {holder.pid} (" in busy.stderr, busy.stderr
    assert f"; before it, pid {waiter.pid} (" in busy.stderr, busy.stderr
    assert busy.stderr.rstrip().endswith("waits for GPU=8); use --wait to queue"), busy.stderr


def test_ps_lists_waiting_requests_in_order(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.json"
    holder = hold_everything(ledger, tmp_path)
    waiter = start(ledger, "run", "-r", "GPU=2", "--wait", "--host", H100, "--", "true")
    waiter.stderr.readline()  # type: ignore[union-attr]
    listing = json.loads(run(ledger, "ps", "--json").stdout)
    assert [(w["pid"], w["wants"]) for w in listing["waiting"]] == [(waiter.pid, "GPU=2")]
    assert "TICKET" in run(ledger, "ps").stdout
    (tmp_path / "go").touch()
    assert holder.wait(timeout=60) == 0 and waiter.wait(timeout=60) == 0


def test_an_empty_command_name_is_refused_before_any_grant(tmp_path: Path) -> None:
    """``accelkit run -- ''`` took a grant, then failed in exec (``argv first element cannot be
    empty``, a ValueError) with status 2 and its grant left to the ledger's next look."""
    ledger = tmp_path / "ledger.json"
    refused = run(ledger, "run", "-r", "GPU=1", "--host", H100, "--", "", "x")
    assert refused.returncode == 2
    assert refused.stderr == (
        "accelkit run: error: the command's name is empty (an unset variable?): give the "
        "command to run after --: accelkit run -r GPU=1 -- CMD ...\n"
    )
    assert not ledger.exists()  # no grant was ever taken


def test_a_command_exec_refuses_as_a_value_gives_its_grant_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """exec raises ValueError for what no process may get (a NUL in an argument or a
    variable): the grant is given back, as for a command that cannot be run."""
    from accelkit.cli import main

    def refuse(*_args: object) -> None:
        raise ValueError("embedded null byte")

    ledger = tmp_path / "ledger.json"
    monkeypatch.setattr(os, "execvpe", refuse)
    code = main(["run", "-r", "GPU=1", "--ledger", str(ledger), "--host", H100, "--", "true"])
    assert code == EXIT_CANNOT_EXECUTE
    assert "accelkit run: cannot run 'true': embedded null byte" in capsys.readouterr().err
    assert Ledger(ledger).grants() == []


def test_exit_codes_before_the_command_runs(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.json"
    missing = run(ledger, "run", "-r", "GPU=1", "--host", H100, "--", "no-such-command-here")
    assert missing.returncode == EXIT_NOT_FOUND
    assert "cannot run 'no-such-command-here'" in missing.stderr
    assert Ledger(ledger).grants() == []  # given back
    never = run(ledger, "run", "-r", "GPU=9", "--wait", "--host", H100, "--", "true")
    assert never.returncode == 2 and "can never fit" in never.stderr
    holder = hold_everything(ledger, tmp_path)
    late = run(
        ledger, "run", "-r", "GPU=1", "--wait", "--timeout", "0.1", "--host", H100, "--", "true"
    )
    assert late.returncode == EXIT_TIMED_OUT and "gave up" in late.stderr
    assert "warning" not in late.stderr
    misspelt = run(
        ledger,
        "run",
        "-r",
        "GPU=1",
        "--wait",
        "--timeout",
        "0.1",
        "--host",
        H100,
        "--",
        "no-such-command-here",
    )
    # said before the wait, not once the devices are free
    assert misspelt.stderr.index("'no-such-command-here' is not an executable on PATH") < (
        misspelt.stderr.index("gave up")
    )
    (tmp_path / "go").touch()
    assert holder.wait(timeout=60) == 0
    for argv, complaint in [
        (["-r", "GPU=1"], "give the command to run after --"),
        (["--", "true"], "say what to take with -r"),
        (["-r", "GPU=1", "--timeout", "1", "--", "true"], "--timeout applies to --wait"),
    ]:
        usage = run(ledger, "run", "--host", H100, *argv)
        assert usage.returncode == 2 and complaint in usage.stderr


@pytest.mark.parametrize(
    ("seconds", "said"),
    [
        ("-5", "'-5' is negative: give the seconds to wait, 0 or more (e.g. 30 or 0.5)"),
        ("-0.5", "'-0.5' is negative: give the seconds to wait, 0 or more"),
        ("soon", "'soon' is not a number of seconds (e.g. 30 or 0.5)"),
        ("nan", "'nan' is not a number of seconds"),
    ],
)
def test_a_timeout_that_is_no_wait_says_why(
    capsys: pytest.CaptureFixture[str], seconds: str, said: str
) -> None:
    """``--timeout -5`` said "'-5' is not a number of seconds": it is one, a negative one."""
    from accelkit.cli import main

    with pytest.raises(SystemExit) as stop:
        main(["run", "-r", "GPU=1", "--wait", "--timeout", seconds, "--", "true"])
    assert stop.value.code == 2
    error = capsys.readouterr().err.splitlines()[-1]
    assert error.startswith(f"accelkit run: error: argument --timeout: {said}")


def test_kill_9_at_random_moments_leaves_no_lost_or_phantom_grant(
    tmp_path: Path, h100: Node
) -> None:
    ledger = tmp_path / "ledger.json"
    chance = random.Random(11)
    runs = []
    for _ in range(12):
        quantity = chance.choice(["0.5", "1", "2", "4"])
        runs.append(
            start(
                ledger,
                "run",
                "-r",
                f"GPU={quantity}",
                "--wait",
                "--host",
                H100,
                "--",
                "sleep",
                "30",
            )
        )
    doomed = list(runs)
    chance.shuffle(doomed)
    view = Ledger(ledger, h100)
    stages = []
    pids = {p.pid for p in runs}
    for number, process in enumerate(doomed):
        if number == len(doomed) // 2:
            # Half way, make sure the next one dies as a command holding its grant: wait for
            # a holder and kill it first, whatever the machine's load did to the timing.
            holder = wait_for_holder(view)
            doomed[number:] = sorted(doomed[number:], key=lambda p: p.pid != holder)
            process = doomed[number]
        time.sleep(chance.uniform(0, 0.3))  # before, during or after the acquire and the exec
        stages.append(audit(view, pids, process.pid))
        process.kill()
        process.wait(timeout=60)
    audit(view, set(), 0)
    assert "holding" in stages, stages  # some were killed as the command, holding a grant
    assert view.view().waiting == ()  # no waiter left behind
    everything = view.acquire({"GPU": 8})  # nothing lost: the whole node is free again
    assert everything is not None


def wait_for_holder(ledger: Ledger) -> int:
    deadline = time.monotonic() + 60
    while not ledger.view().holdings:
        assert time.monotonic() < deadline, "no run ever held a grant"
        time.sleep(0.01)
    return ledger.view().holdings[0].holder.pid


def audit(ledger: Ledger, pids: set[int], pid: int) -> str:
    """No device over its capacity, and every grant held by one of ``pids``; where ``pid`` is:
    "holding", "waiting" or "starting"."""
    used: dict[str, float] = {}
    view = ledger.view()
    for holding in view.holdings:
        assert holding.holder.pid in pids, f"{holding} is held by a process that is not running"
        for device, share in holding.grant.devices:
            used[device.id] = used.get(device.id, 0) + share
    assert all(total <= 1 + 1e-9 for total in used.values()), used
    if any(h.holder.pid == pid for h in view.holdings):
        return "holding"
    return "waiting" if any(w.holder.pid == pid for w in view.waiting) else "starting"


def test_the_guide_documents_the_exit_codes_and_says_variables_are_advisory() -> None:
    guide = (ROOT / "docs" / "sharing-a-machine.md").read_text()
    assert "Visibility variables are advisory, not isolation" in guide
    assert f"| {EXIT_BUSY} | the request does not fit now" in guide
    assert f"| {EXIT_TIMED_OUT} | `--wait --timeout S` ran out" in guide
    assert f"| {EXIT_NOT_FOUND}, {EXIT_CANNOT_EXECUTE} | the command was not found" in guide
