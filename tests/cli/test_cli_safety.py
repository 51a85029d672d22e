"""The command line in shell scripts and in front of operators (issue 14, items 10-12): a failed
``accelkit env`` fails the ``eval`` too, an empty request says what it did, ``--host`` honours
the shell's variables out loud, errors are one escaped line, ``ls -v`` explains computed facts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from accelkit.cli import main, printable

NODES = Path(__file__).resolve().parents[2] / "examples" / "nodes"
SHELL_VARIABLES = ("ACCELKIT_", "CUDA_", "TPU_", "HABANA_", "ROCR_", "HIP_", "ZE_", "ONEAPI_")


@pytest.fixture
def empty_host(tmp_path: Path) -> str:
    (tmp_path / "root").mkdir()
    manifest = {"format": "accelkit-snapshot", "version": 1, "env": {}, "commands": []}
    (tmp_path / "snapshot.json").write_text(json.dumps(manifest))
    return str(tmp_path)


@pytest.fixture(autouse=True)
def quiet_shell(monkeypatch: pytest.MonkeyPatch) -> None:
    """No operator or visibility variable of the machine running the tests leaks in."""
    for name in list(os.environ):
        if name.startswith(SHELL_VARIABLES):
            monkeypatch.delenv(name)


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as stop:
        code = int(stop.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def shell(script: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(SHELL_VARIABLES)}
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env)


@pytest.mark.parametrize(
    "argv",
    [["-r", "GPU=1"], ["-r", "GPU=x"], ["--bogus"], ["-r", "GPU=1", "--override", "GPU=oops"]],
)
def test_a_failing_env_prints_false_so_eval_fails(
    capsys: pytest.CaptureFixture[str], empty_host: str, argv: list[str]
) -> None:
    code, out, err = cli(capsys, "env", *argv, "--host", empty_host)
    assert code != 0 and out == "false\n" and err.strip()


def test_set_e_stops_a_script_whose_env_failed(empty_host: str) -> None:
    command = f"{sys.executable} -m accelkit.cli env -r GPU=1 --host {empty_host}"
    result = shell(f'set -e; eval "$({command})"; echo carried on')
    assert result.returncode != 0 and "carried on" not in result.stdout
    result = shell(f'out=$({command}) && eval "$out" || echo stopped')
    assert result.stdout == "stopped\n"


def test_env_json_failure_prints_no_false(
    capsys: pytest.CaptureFixture[str], empty_host: str
) -> None:
    code, out, _ = cli(capsys, "env", "--json", "-r", "GPU=1", "--host", empty_host)
    assert code != 0 and out == ""


def test_env_help_says_what_a_json_failure_prints(capsys: pytest.CaptureFixture[str]) -> None:
    """The help promised ``false`` on stdout for every failure, --json included."""
    code, out, _ = cli(capsys, "env", "--help")
    assert code == 0
    assert "with --json it holds nothing, as for every --json verb" in " ".join(out.split())


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        ([], "no request (-r RES=Q) takes no device; printing nothing"),
        (
            ["-r", "GPU=0"],
            "the request (GPU=0) takes no device; printing 2 variable(s) that hide the node's "
            "devices (a request for no device, as in accelkit run)",
        ),
        (["-r", "GPU=0", "--hide-others"], "printing 2 variable(s) that hide"),
    ],
)
def test_an_empty_request_says_what_it_did(
    capsys: pytest.CaptureFixture[str], argv: list[str], said: str
) -> None:
    """A request for no device hides the node's devices, as ``accelkit run`` hides them from
    its command; no request at all prints nothing."""
    node = str(NODES / "nvidia-h100-8gpu")
    code, out, err = cli(capsys, "env", *argv, "--host", node)
    assert code == 0 and said in err
    assert ("unset" in out or "export" in out) == bool(argv)


@pytest.mark.parametrize(
    "argv",
    [["ls"], ["ls", "--json"], ["env", "-r", "GPU=1"], ["resources"], ["ps"], ["plugins"]],
    ids=lambda argv: " ".join(argv),
)
@pytest.mark.parametrize("host", ["", " "], ids=["empty", "blank"])
def test_an_empty_host_is_bad_usage_not_this_machine(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], host: str
) -> None:
    """``--host "$SNAP"`` with SNAP unset detected this machine and reported it as the
    snapshot's node (``ls --host ''`` listed the local GPUs)."""
    ledger = ["--ledger", str(tmp_path / "ledger.json")] if argv[0] in ("env", "ps") else []
    code, out, err = cli(capsys, *argv, *ledger, "--host", host)
    assert code == 2
    assert out == ("false\n" if argv[0] == "env" else "")
    assert err.splitlines()[-1] == (
        f"accelkit {argv[0]}: error: argument --host: {host!r} names no directory (an unset "
        "variable?): give the directory of a snapshot made by `accelkit snapshot`, or leave "
        "--host out to read this machine"
    )


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        ([], "no request (-r RES=Q) takes no device; printing the grant, its env empty: "),
        (
            ["-r", "GPU=0"],
            "the request (GPU=0) takes no device; printing the grant, its env holding 2 "
            "variable(s) that hide the node's devices (a request for no device, as in accelkit "
            "run)",
        ),
    ],
)
def test_an_empty_request_in_json_says_it_prints_the_grant(
    capsys: pytest.CaptureFixture[str], argv: list[str], said: str
) -> None:
    """``env -r GPU=0 --json`` said "printing nothing" and printed a JSON grant."""
    node = str(NODES / "nvidia-h100-8gpu")
    code, out, err = cli(capsys, "env", *argv, "--json", "--host", node)
    assert code == 0 and said in err and "printing nothing" not in err
    assert len(json.loads(out)["env"]) == (2 if argv else 0)


def test_only_a_type_says_it_takes_no_device(capsys: pytest.CaptureFixture[str]) -> None:
    node = str(NODES / "nvidia-h100-8gpu")
    code, _, err = cli(capsys, "env", "-r", "accelerator_type=H100", "--host", node)
    assert code == 0 and "(accelerator_type=H100) takes no device" in err


def test_host_replays_the_snapshots_vendor_variables_and_takes_the_operators(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """This shell's vendor variables describe this machine (a GPU container sets
    NVIDIA_VISIBLE_DEVICES): the replayed node keeps its own. The operator's ACCELKIT_* ones
    apply, and one stderr line names them."""
    monkeypatch.setenv("NVIDIA_VISIBLE_DEVICES", "all")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    monkeypatch.setenv("ACCELKIT_EXCLUDE_DEVICES", "nvidia:3")
    code, out, err = cli(capsys, "ls", "--json", "--host", str(NODES / "nvidia-h100-8gpu"))
    assert code == 0
    assert [d["id"] for d in json.loads(out)["devices"]] == ["0", "1", "2", "4", "5", "6", "7"]
    assert err.splitlines() == [
        f"accelkit: --host {NODES / 'nvidia-h100-8gpu'}: this shell's "
        "ACCELKIT_EXCLUDE_DEVICES='nvidia:3' replace(s) the snapshot's"
    ]


def test_host_takes_every_accelkit_variable_from_the_shell_as_help_and_readme_say(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not only the two detection reads: a NOSET and the plugin switches apply too."""
    node = str(NODES / "nvidia-h100-8gpu")
    readme = " ".join((NODES.parents[1] / "README.md").read_text().split())
    assert "only `ACCELKIT_*` variables come from this shell, all of them" in readme
    _, helped, _ = cli(capsys, "ls", "--help")
    assert "only ACCELKIT_* ones come from this shell" in " ".join(helped.split())
    monkeypatch.setenv("ACCELKIT_NOSET_NVIDIA", "1")
    code, out, _ = cli(capsys, "env", "-r", "GPU=1", "--host", node)
    assert code == 0 and "CUDA_VISIBLE_DEVICES" not in out
    monkeypatch.delenv("ACCELKIT_NOSET_NVIDIA")
    listed = subprocess.run(
        [sys.executable, "-m", "accelkit.cli", "ls", "--json", "--host", node],
        capture_output=True,
        text=True,
        env={**os.environ, "ACCELKIT_DISABLE_PLUGINS": "nvidia"},
    )
    assert listed.returncode == 0 and json.loads(listed.stdout)["devices"] == []


def test_host_says_nothing_of_the_shells_vendor_variables(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NVIDIA_VISIBLE_DEVICES", "all")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.delenv("ACCELKIT_EXCLUDE_DEVICES", raising=False)
    monkeypatch.delenv("ACCELKIT_OVERRIDE_RESOURCES", raising=False)
    code, out, err = cli(capsys, "ls", "--json", "--host", str(NODES / "nvidia-h100-8gpu"))
    assert code == 0 and err == ""
    assert len(json.loads(out)["devices"]) == 8


def test_host_validates_the_shell_override(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, empty_host: str
) -> None:
    monkeypatch.setenv("ACCELKIT_OVERRIDE_RESOURCES", "{nope")
    code, _, err = cli(capsys, "ls", "--host", empty_host)
    assert code == 2 and "ACCELKIT_OVERRIDE_RESOURCES" in err and "not JSON" in err


def test_errors_escape_control_characters(
    capsys: pytest.CaptureFixture[str], empty_host: str
) -> None:
    code, _, err = cli(capsys, "env", "-r", "GPU=\x1b[31mred\nline", "--host", empty_host)
    assert code == 2
    assert "\x1b" not in err and err.count("\n") == 1
    code, _, err = cli(capsys, "ls", "--nope\x07\n", "--host", empty_host)
    assert code == 2 and "\x07" not in err and "\\x07" in err


def test_printable_escapes_only_control_characters() -> None:
    assert printable("GPU\n\x00\x1bé²\u202e") == "GPU\\n\\x00\\x1bé²\\u202e"


def test_an_internal_error_is_a_sentence_not_a_traceback(
    capsys: pytest.CaptureFixture[str], empty_host: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from accelkit.cli import _ls as ls

    def broken(*args: object, **kwargs: object) -> None:
        raise RecursionError("too deep")

    monkeypatch.setattr(ls, "report", broken)
    code, _, err = cli(capsys, "ls", "--host", empty_host)
    assert code == 1
    assert "internal error: RecursionError: too deep" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("node", "explained"),
    [
        ("intel-max1550-4gpu", "intel: 8 devices on 4 PCI card(s)"),
        ("tpu-v6e-8", "tpu: node resource TPU-v6e-8-head = 1 comes from the plugin"),
        ("mixed-nvidia-ascend", "no accelkit/accelerator-type label: the node's devices have"),
    ],
)
def test_ls_verbose_explains_computed_facts(
    capsys: pytest.CaptureFixture[str], node: str, explained: str
) -> None:
    code, out, _ = cli(capsys, "ls", "-v", "--host", str(NODES / node))
    assert code == 0 and explained in out
    _, quiet, _ = cli(capsys, "ls", "--host", str(NODES / node))
    assert explained not in quiet


def test_the_script_exits_with_mains_code_and_frozen_objects() -> None:
    """The ``accelkit`` script is :func:`accelkit.cli.script`: main's exit code, the command's
    garbage-collector thresholds, and every object frozen out of the last collection (start-up
    cuts); atexit handlers still run (last registered, first). ``main`` itself, which callers
    run in-process, leaves the collector alone."""
    from accelkit._distributions import metadata
    from accelkit.cli import COMMAND_GC_THRESHOLDS

    (entry,) = metadata.entry_points(group="console_scripts", name="accelkit")
    assert entry.value == "accelkit.cli:script"
    node = Path(__file__).resolve().parents[2] / "examples" / "nodes" / "nvidia-h100-8gpu"
    code = (
        "import atexit, gc, sys\n"
        "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0, file=sys.stderr))\n"
        "atexit.register(lambda: print('thresholds', gc.get_threshold(), file=sys.stderr))\n"
        "from accelkit.cli import main, script\n"
        "before = gc.get_freeze_count()\n"  # an environment's start-up may freeze its own
        "main(['resources', '--host', sys.argv[1]])\n"
        "print('main froze', gc.get_freeze_count() - before, file=sys.stderr)\n"
        "sys.argv[1:] = ['env', '--host', sys.argv[1], '-r', 'NOSUCH=1']\n"
        "script()\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(node)], capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert "main froze 0\n" in done.stderr and done.stderr.endswith(
        f"thresholds {COMMAND_GC_THRESHOLDS}\nfrozen True\n"
    )


@pytest.mark.parametrize(
    ("formats", "line"),
    [
        (["--json"], ""),
        (["--js"], ""),  # argparse reads the abbreviation as --json
        (["--format=json"], ""),
        (["--json", "--format", "shell"], "false\n"),  # the last format is the one printed
        (["--format", "json", "--format", "taskprolog"], "false\n"),
        ([], "false\n"),
    ],
)
def test_a_failed_env_prints_false_unless_the_format_it_chose_is_json(
    capsys: pytest.CaptureFixture[str], formats: list[str], line: str
) -> None:
    # an eval of a failed `accelkit env` must fail too, whatever spelling chose its format
    node = str(NODES / "nvidia-h100-8gpu")
    code, out, _ = cli(capsys, "env", "-r", "GPU=9", "--host", node, *formats)
    assert code != 0 and out == line
