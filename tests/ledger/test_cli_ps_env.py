"""`accelkit ps` for every user of a ledger (its user column, `--host`, a ledger it may only read)
and `accelkit env`, which takes nothing but says when the ledger holds what it names."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from accelkit.ledger._holder import boot_id
from ledger_support import H100, accelkit, run, start

HOLD = 'echo "$CUDA_VISIBLE_DEVICES"; while [ ! -e "$0/go" ]; do sleep 0.02; done'


def test_ps_with_host_says_what_of_that_node_is_free(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.json"
    holder = start(
        ledger, "run", "-r", "GPU=0.5", "--host", H100, "--", "sh", "-c", HOLD, str(tmp_path)
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "0"
    listing = run(ledger, "ps", "--host", H100)
    assert listing.returncode == 0
    assert listing.stdout.splitlines()[-1] == "free: GPU 1,2,3,4,5,6,7; GPU 0 (0.5 free)"
    as_json = json.loads(run(ledger, "ps", "--host", H100, "--json").stdout)
    assert as_json["free"] == {"GPU": ["1", "2", "3", "4", "5", "6", "7"]}
    assert as_json["partly_free"] == {"GPU": [["0", 0.5]]}
    assert as_json["partly_free_by_family"] == {"nvidia": [["0", 0.5]]}
    assert as_json["grants"][0]["uid"] == os.getuid()
    tpu = str(Path(H100).parent / "tpu-v6e-8")
    other = run(ledger, "ps", "--host", tpu)
    assert "serves another node (GPU=8" in other.stderr
    assert other.stdout.splitlines()[-1] == "free: TPU 0,1,2,3,4,5,6,7"
    (tmp_path / "go").touch()
    assert holder.wait(timeout=60) == 0


def test_ps_with_host_says_the_share_left_of_a_device_held_in_part(tmp_path: Path) -> None:
    """With GPU=0.5 held on a one-GPU node, ``ps --host`` said ``free: nothing`` (``"free":
    {}``) while ``run -r GPU=0.5`` took the other half: a device held in part is free in part."""
    ledger, one_gpu = tmp_path / "ledger.json", str(Path(H100).parent / "nvidia-h100-1gpu")
    holder = start(
        ledger, "run", "-r", "GPU=0.3", "--host", one_gpu, "--", "sh", "-c", HOLD, str(tmp_path)
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "0"
    assert run(ledger, "ps", "--host", one_gpu).stdout.splitlines()[-1] == "free: GPU 0 (0.7 free)"
    as_json = json.loads(run(ledger, "ps", "--host", one_gpu, "--json").stdout)
    assert (as_json["free"], as_json["free_by_family"]) == ({}, {})
    assert as_json["partly_free"] == {"GPU": [["0", 0.7]]}
    assert as_json["partly_free_by_family"] == {"nvidia": [["0", 0.7]]}
    assert run(ledger, "run", "-r", "GPU=0.7", "--host", one_gpu, "--", "true").returncode == 0
    (tmp_path / "go").touch()
    assert holder.wait(timeout=60) == 0


def test_ps_shows_which_devices_a_restricted_waiter_waits_for(tmp_path: Path) -> None:
    """A waiter that sees some devices only lets grants of the others pass: ``ps`` says which
    it sees, beside its request (``--json``: ``sees``, as ``[family, id]`` pairs)."""
    ledger = tmp_path / "ledger.json"
    holder = start(
        ledger, "run", "-r", "GPU=8", "--host", H100, "--", "sh", "-c", HOLD, str(tmp_path)
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "0,1,2,3,4,5,6,7"
    seeing = tmp_path / "seeing"  # the node, as a shell with CUDA_VISIBLE_DEVICES=2,3 sees it
    shutil.copytree(H100, seeing, symlinks=True)
    manifest = json.loads((seeing / "snapshot.json").read_text())
    manifest["env"]["CUDA_VISIBLE_DEVICES"] = "2,3"
    (seeing / "snapshot.json").write_text(json.dumps(manifest))
    waiter = start(ledger, "run", "-r", "GPU=1", "--wait", "--host", str(seeing), "--", "true")
    deadline = time.monotonic() + 60
    while not json.loads(run(ledger, "ps", "--json").stdout)["waiting"]:
        assert time.monotonic() < deadline, "the request never waited"
        time.sleep(0.05)
    listing = run(ledger, "ps").stdout
    (waiting,) = json.loads(run(ledger, "ps", "--json").stdout)["waiting"]
    (tmp_path / "go").touch()
    assert holder.wait(timeout=60) == 0 and waiter.wait(timeout=60) == 0
    assert "GPU=1 (sees nvidia:2, nvidia:3)" in listing
    assert (waiting["wants"], waiting["sees"]) == ("GPU=1", [["nvidia", "2"], ["nvidia", "3"]])


def test_ps_says_when_nothing_has_used_the_ledger_it_lists(tmp_path: Path) -> None:
    """A mistyped ``--ledger`` listed as an idle node; ``ps`` says there is no such file (or
    directory) yet, and still lists it (a fresh node has none either)."""
    unused = run(tmp_path / "ledger.json", "ps")
    assert unused.returncode == 0
    assert unused.stdout.splitlines()[0].endswith(
        "(no such file yet: nothing has used this ledger)"
    )
    typo = run(tmp_path / "ledgers" / "ledger.json", "ps")
    assert typo.returncode == 0
    assert f"(no such directory: {tmp_path / 'ledgers'}; nothing" in typo.stdout.splitlines()[0]


def test_ps_and_run_show_other_users_command_lines_without_their_control_characters(
    tmp_path: Path,
) -> None:
    """A holder's command line is anyone's text: escape sequences in it (a terminal title, a
    cleared screen, a fake line) reached other users' terminals through ``ps`` and ``run``."""
    ledger = tmp_path / "ledger.json"
    trap = "\x1b]0;pwned\x07\x1b[2J\nFAKE LINE"
    holder = start(
        ledger, "run", "-r", "GPU=8", "--host", H100, "--", "sh", "-c", HOLD, str(tmp_path), trap
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "0,1,2,3,4,5,6,7"
    listing = run(ledger, "ps")
    busy = run(ledger, "run", "-r", "GPU=1", "--host", H100, "--", "true")
    (tmp_path / "go").touch()
    assert holder.wait(timeout=60) == 0
    for shown in (listing.stdout, busy.stderr):
        assert "\\x1b]0;pwned\\x07\\x1b[2J\\nFAKE LINE" in shown, shown
        assert "\x1b" not in shown and "\x07" not in shown and "\nFAKE" not in shown


LIST = 'mount --bind -o ro "$1" "$1" && shift && exec "$@"'


def test_ps_lists_a_ledger_it_may_only_read(tmp_path: Path) -> None:
    """A group's ledger, readable by a member who may not write it: listed as it is, with the
    holder that ended left out of the listing (its grant stays in the file for a writer)."""
    folder = tmp_path / "group"
    folder.mkdir()
    ledger = folder / "ledger.json"
    holder = start(
        ledger, "run", "-r", "GPU=1", "--host", H100, "--", "sh", "-c", HOLD, str(tmp_path)
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "0"
    data = json.loads(ledger.read_text())
    ended = dict(data["grants"][0], holder={"pid": 2**22 + 3, "start": 1}, user=None)
    ended["grant"] = dict(ended["grant"], token=ended["grant"]["token"] + 1)
    ledger.write_text(json.dumps({**data, "grants": [*data["grants"], ended]}))
    (folder / "ledger.json.lock").unlink()
    argv = accelkit(ledger, "ps", "--json")
    if os.geteuid() == 0:  # root writes through permission bits: a read-only mount stops it
        argv = ["unshare", "-m", "sh", "-c", LIST, "sh", str(folder), *argv]
    else:
        folder.chmod(0o555)
    try:
        listing = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    finally:
        folder.chmod(0o755)
    if "mount" in listing.stderr:
        pytest.skip(f"cannot mount read-only here: {listing.stderr.strip()}")
    assert listing.returncode == 0, listing.stderr
    grants = json.loads(listing.stdout)["grants"]
    assert [(g["pid"], g["ids"]) for g in grants] == [(holder.pid, {"GPU": ["0"]})]
    assert len(json.loads(ledger.read_text())["grants"]) == 2  # the file as it was
    (tmp_path / "go").touch()
    assert holder.wait(timeout=60) == 0


def test_env_takes_nothing_and_says_when_the_ledger_holds_what_it_names(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.json"
    holder = start(
        ledger, "run", "-r", "GPU=1", "--host", H100, "--", "sh", "-c", HOLD, str(tmp_path)
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "0"
    before = ledger.read_text()
    shown = run(ledger, "env", "-r", "GPU=1", "--host", H100)
    assert shown.returncode == 0 and "export CUDA_VISIBLE_DEVICES=0" in shown.stdout
    assert f"the ledger {ledger} holds devices this environment names (GPU 0 by pid " in (
        shown.stderr
    )
    assert f"pid {holder.pid}" in shown.stderr and "accelkit run takes devices" in shown.stderr
    assert ledger.read_text() == before  # nothing taken
    two = run(ledger, "env", "-r", "GPU=1", "--override", "GPU=4", "--host", H100)
    assert "holds devices" in two.stderr  # an override narrows what it names, not the node
    (tmp_path / "go").touch()
    assert holder.wait(timeout=60) == 0
    quiet = run(ledger, "env", "-r", "GPU=1", "--host", H100)
    assert quiet.returncode == 0 and quiet.stderr == ""


def test_env_names_only_the_devices_it_shares_with_a_holder(tmp_path: Path) -> None:
    """With GPU=8 held, ``env -r GPU=1`` said the ledger held "devices this environment names
    (GPU 0,1,2,3,4,5,6,7 by pid ...)": the holder's whole grant, where it names GPU 0 only."""
    ledger = tmp_path / "ledger.json"
    holder = start(
        ledger, "run", "-r", "GPU=8", "--host", H100, "--", "sh", "-c", HOLD, str(tmp_path)
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "0,1,2,3,4,5,6,7"
    one = run(ledger, "env", "-r", "GPU=1", "--host", H100)
    two = run(ledger, "env", "-r", "GPU=2", "--host", H100)
    (tmp_path / "go").touch()
    assert holder.wait(timeout=60) == 0
    assert f"names (GPU 0 by pid {holder.pid} (sh -c " in one.stderr
    assert f"names (GPU 0,1 by pid {holder.pid} (sh -c " in two.stderr


def test_env_says_when_it_cannot_read_the_ledger_and_still_prints(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.json"
    ledger.write_text(json.dumps({"version": 3, "boot": boot_id()}))
    shown = run(ledger, "env", "-r", "GPU=1", "--host", H100)
    assert shown.returncode == 0 and "export CUDA_VISIBLE_DEVICES=0" in shown.stdout
    assert "cannot check the node's ledger" in shown.stderr and "is corrupt" in shown.stderr
    assert json.loads(ledger.read_text()) == {"version": 3, "boot": boot_id()}  # left as it is


@pytest.mark.parametrize("json_output", [False, True], ids=["shell", "json"])
@pytest.mark.parametrize("request_", ["GPU=1", "GPU=0"])
def test_env_refuses_a_relative_ledger_as_run_and_ps_do(
    tmp_path: Path, json_output: bool, request_: str
) -> None:
    """``env --ledger rel.json`` (or ``ACCELKIT_LEDGER=rel.json``) printed the exports and
    exited 0, with a note (or, for a request of no device, said nothing), where ``run``, ``ps``
    and ``dask-worker`` refuse it: a shell built from it meets no ``run`` of the node's ledger."""
    asked = ["env", "-r", request_, "--host", H100, *(["--json"] if json_output else [])]
    shell = {k: v for k, v in os.environ.items() if k not in ("ACCELKIT_LEDGER", "ACCELKIT_GRANT")}
    given = subprocess.run(
        [*accelkit(Path("rel.json"), *asked)], capture_output=True, text=True, cwd=tmp_path
    )
    from_variable = subprocess.run(
        [sys.executable, "-m", "accelkit.cli", *asked],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**shell, "ACCELKIT_LEDGER": "rel.json"},
    )
    for done, source in ((given, "the ledger path 'rel.json'"), (from_variable, "ACCELKIT_LEDGER")):
        assert done.returncode == 2
        assert done.stdout == ("" if json_output else "false\n")
        assert done.stderr.startswith(f"accelkit env: error: {source}")
        assert f"give an absolute path (e.g. {tmp_path / 'rel.json'})" in done.stderr
    assert not (tmp_path / "rel.json").exists()


def test_env_only_notes_a_grant_variable_that_names_no_grant(tmp_path: Path) -> None:
    shell = {**os.environ, "ACCELKIT_GRANT": "garbage", "ACCELKIT_LEDGER": "rel.json"}
    shown = run(tmp_path / "ledger.json", "env", "-r", "GPU=1", "--host", H100, env=shell)
    assert shown.returncode == 0 and "export CUDA_VISIBLE_DEVICES=0" in shown.stdout
    shell.pop("ACCELKIT_LEDGER")
    done = subprocess.run(
        [sys.executable, "-m", "accelkit.cli", "env", "-r", "GPU=1", "--host", H100],
        capture_output=True,
        text=True,
        env=shell,
    )
    assert done.returncode == 0 and "export CUDA_VISIBLE_DEVICES=0" in done.stdout
    assert done.stderr.startswith("accelkit env: cannot check the node's ledger: ACCELKIT_GRANT")


def test_ps_of_a_file_that_is_no_ledger_says_so_and_never_to_remove_it(tmp_path: Path) -> None:
    package = tmp_path / "package.json"
    package.write_text('{"name": "x", "version": "1.0.0"}')
    listing = run(package, "ps")
    assert listing.returncode == 2 and listing.stdout == ""
    assert listing.stderr.startswith(f"accelkit ps: error: {package} is not an accelkit ledger (")
    assert "rm " not in listing.stderr and "corrupt" not in listing.stderr


@pytest.mark.parametrize(
    "verb", [["ps"], ["env", "-r", "GPU=1", "--host", H100]], ids=["ps", "env"]
)
def test_an_empty_ledger_path_is_bad_usage_said_as_such(verb: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "accelkit.cli", verb[0], "--ledger", "", *verb[1:]],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stdout == ("false\n" if verb[0] == "env" else "")
    assert done.stderr == (
        f"accelkit {verb[0]}: error: the ledger path '' is empty: give the absolute path of the "
        "ledger's file, or none (no --ledger, path=None) for the default ledger\n"
    )
