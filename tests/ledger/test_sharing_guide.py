"""``docs/sharing-a-machine.md`` runs as written: each fenced block follows a marker saying how.

``<!-- run: bash -->`` blocks run in a shell whose ``accelkit`` replays the recorded H100 node
(``--host``), in a directory with stand-ins for the scripts they name; ``<!-- file: NAME -->``
blocks are written there first; ``<!-- run: python -->`` blocks run as scripts on eight GPUs an
operator's override makes up, with a stand-in ``torch``; ``<!-- output: accelkit VERB -->``
blocks must have the shape of what that verb prints in the same situation; a
``<!-- setup: WHY -->`` block is not run, for the reason given.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from ledger_support import H100, ROOT, run, start

GUIDE = ROOT / "docs" / "sharing-a-machine.md"
BLOCK = re.compile(
    r"(?:<!-- (?P<kind>run|file|output|setup): (?P<what>[^>]+?) -->\n)?"
    r"```(?P<lang>\w*)\n(?P<body>.*?)```",
    re.DOTALL,
)
HOLD = 'while [ ! -e "$0/go" ]; do sleep 0.02; done'
STAND_INS = {
    "train.py": "import sys\n",
    "eval.py": "import sys\n",
    "preprocess.py": "import sys\n",
    "job.sh": "#!/bin/sh\n",
    "torch/__init__.py": '"""A stand-in for torch: the guide imports it in its workers."""\n',
}


def blocks(kind: str) -> list[re.Match[str]]:
    return [m for m in BLOCK.finditer(GUIDE.read_text()) if m["kind"] == kind]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A directory with the scripts the guide runs, an ``accelkit`` on the recorded H100 node
    and a ``python`` first on PATH, and its own ledger."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = f'#!/bin/sh\nverb="$1"; shift\nexec "{sys.executable}" -m accelkit.cli "$verb" '
    wrapper += f'--host "{H100}" "$@"\n'
    executable(bin_dir / "accelkit", wrapper)
    executable(bin_dir / "python", f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    for name, text in STAND_INS.items():
        path = tmp_path / name
        path.parent.mkdir(exist_ok=True)
        executable(path, text)
    for match in blocks("file"):
        executable(tmp_path / match["what"], match["body"])
    return tmp_path


def executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def environment(workdir: Path, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "PATH": f"{workdir / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "ACCELKIT_LEDGER": str(workdir / "ledger.json"),
        **extra,
    }


def test_every_block_says_how_it_is_checked() -> None:
    found = list(BLOCK.finditer(GUIDE.read_text()))
    assert [m["body"][:40] for m in found if m["kind"] is None] == []
    assert len(blocks("run")) >= 6 and blocks("output") and blocks("file")


@pytest.mark.parametrize("block", range(len(blocks("run"))))
def test_each_example_runs_as_written(workdir: Path, block: int) -> None:
    match = blocks("run")[block]
    if match["what"] == "bash":
        argv = ["bash", "-e", "-c", match["body"]]
        env = environment(workdir)
    else:
        (workdir / "example.py").write_text(match["body"])
        argv = [sys.executable, "example.py"]
        env = environment(workdir, ACCELKIT_OVERRIDE_RESOURCES='{"GPU": 8}')
        env["PYTHONPATH"] = os.pathsep.join([str(workdir), env.get("PYTHONPATH", "")])
    result = subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    if match["what"] == "bash":  # each run took its grant, and each step of a job its step
        scripts = [m["body"] for m in blocks("file") if f"./{m['what']}" in match["body"]]
        lines = "\n".join([match["body"], *scripts]).splitlines()
        runs = [line for line in lines if line.startswith("accelkit run ")]
        assert result.stderr.count("accelkit run: took ") == len(runs) > 0, result.stderr
        assert "error" not in result.stderr, result.stderr


def test_the_group_ledger_of_the_setup_is_an_absolute_path() -> None:
    [setup] = blocks("setup")
    [path] = re.findall(r"export ACCELKIT_LEDGER=(\S+)", setup["body"])
    assert os.path.isabs(path)


def shaped(example: str, *paths: str) -> re.Pattern[str]:
    """A pattern for what the guide shows: any pid with any command in parentheses, any path
    where it shows one, any number of blanks where it aligns columns."""
    wild = {r"pid \d+ \([^)]*\)": r"pid \d+ \(.*\)", **{re.escape(p): r"\S+" for p in paths}}
    pieces = re.split("(" + "|".join(wild) + ")", example)
    pattern = "".join(
        next(v for k, v in wild.items() if re.fullmatch(k, piece))
        if odd
        else re.sub(" {2,}", " +", re.escape(piece))
        for odd, piece in zip([False, True] * len(pieces), pieces)
    )
    return re.compile(pattern)


def output(verb: str) -> str:
    [match] = [m for m in blocks("output") if m["what"] == f"accelkit {verb}"]
    return match["body"]


def test_the_waiting_line_is_what_run_says(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.json"
    holder = start(
        ledger, "run", "-r", "GPU=8", "--host", H100, "--", "sh", "-c", HOLD, str(tmp_path)
    )
    wait_until(lambda: run(ledger, "ps", "--json").stdout.count('"pid"') == 1)
    first = start(ledger, "run", "-r", "GPU=8", "--wait", "--host", H100, "--", "true")
    assert first.stderr is not None and first.stderr.readline().startswith("accelkit run: wait")
    second = start(ledger, "run", "-r", "GPU=2", "--wait", "--host", H100, "--", "true")
    assert second.stderr is not None
    line = second.stderr.readline().rstrip("\n")
    assert shaped(output("run --wait").strip()).fullmatch(line), line
    (tmp_path / "go").touch()
    assert holder.wait(timeout=60) == first.wait(timeout=60) == second.wait(timeout=60) == 0


def test_the_ps_listing_and_the_env_note_are_what_the_verbs_print(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.json"
    job = f'"$@" & "$@" & {HOLD}'
    step = [sys.executable, "-m", "accelkit.cli", "run", "-r", "GPU=1", "--host", H100, "--"]
    holder = start(
        ledger, "run", "-r", "GPU=4", "--host", H100, "--", "sh", "-c", job, str(tmp_path),
        *step, "sh", "-c", HOLD, str(tmp_path),
    )  # fmt: skip
    wait_until(lambda: len(json.loads(run(ledger, "ps", "--json").stdout)["grants"]) == 3)
    waiter = start(ledger, "run", "-r", "GPU=8", "--wait", "--host", H100, "--", "true")
    assert waiter.stderr is not None and waiter.stderr.readline()
    listing = run(ledger, "ps").stdout.splitlines()
    shown = output("ps").splitlines()[1:]  # after the prompt line
    assert shaped(shown[0], "/run/user/1000/accelkit/ledger.json").fullmatch(listing[0])
    assert tables(shown) == tables(listing)
    assert [line.startswith("\\_ ") for line in listing[2:5]] == [False, True, True]
    note = run(ledger, "env", "-r", "GPU=2", "--host", H100).stderr.strip()
    example = output("env").strip()
    assert shaped(example, "/run/user/1000/accelkit/ledger.json").fullmatch(note), note
    assert "GPU 0,1,2,3" not in note  # the devices both name, not the job's whole grant
    (tmp_path / "go").touch()
    assert holder.wait(timeout=60) == 0 and waiter.wait(timeout=60) == 0


def tables(lines: list[str]) -> list[list[str]]:
    """The header lines of a ``ps`` listing, as words."""
    return [line.split() for line in lines if line.split()[:1] in (["PID"], ["TICKET"])]


def wait_until(condition: object, timeout: float = 60) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)
