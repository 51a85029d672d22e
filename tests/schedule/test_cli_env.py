"""`accelkit env`: one grant's environment as shell lines or JSON, on a replayed node."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from accelkit.cli import main
from accelkit.cli._env import parse_request, shell_lines, taskprolog_lines

NODES = Path(__file__).resolve().parents[2] / "examples" / "nodes"


@pytest.fixture
def empty_host(tmp_path: Path) -> str:
    """A snapshot of a machine with no accelerator and no variables."""
    (tmp_path / "root").mkdir()
    snapshot = {"format": "accelkit-snapshot", "version": 1, "env": {}, "commands": []}
    (tmp_path / "snapshot.json").write_text(json.dumps(snapshot))
    return str(tmp_path)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["env", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_prints_export_lines(capsys: pytest.CaptureFixture[str], empty_host: str) -> None:
    code, out, _ = run(capsys, "-r", "GPU=1", "--override", "GPU=2", "--host", empty_host)
    assert code == 0
    assert out.splitlines() == [
        "export CUDA_VISIBLE_DEVICES=0",
        "export CUDA_DEVICE_ORDER=PCI_BUS_ID",
    ]


def test_fractions_hints_and_types(capsys: pytest.CaptureFixture[str], empty_host: str) -> None:
    code, out, _ = run(capsys, "-r", "GPU=1/4", "--override", "GPU=1", "--host", empty_host)
    assert code == 0
    assert "export XLA_PYTHON_CLIENT_MEM_FRACTION=0.25" in out.splitlines()
    code, out, _ = run(
        capsys, "-r", "GPU=0.5", "--no-hints", "--override", "GPU=1", "--host", empty_host
    )
    assert "XLA" not in out


def test_json(capsys: pytest.CaptureFixture[str], empty_host: str) -> None:
    code, out, _ = run(capsys, "-r", "TPU=2", "--override", "TPU=4", "--json", "--host", empty_host)
    assert code == 0
    data = json.loads(out)
    assert data["ids"] == {"TPU": ["0", "1"]}
    assert data["env"]["TPU_VISIBLE_CHIPS"] == "0,1"
    assert data["grant"]["resources"] == {"TPU": 2.0}


def test_hide_others(capsys: pytest.CaptureFixture[str], empty_host: str) -> None:
    code, out, _ = run(
        capsys,
        "-r",
        "TPU=1",
        "--override",
        "TPU=4",
        "--override",
        "GPU=1",
        "--hide-others",
        "--host",
        empty_host,
    )
    lines = out.splitlines()
    assert code == 0
    assert "export CUDA_VISIBLE_DEVICES=''" in lines
    assert "export TPU_VISIBLE_CHIPS=0" in lines


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-r", "GPU=3", "--override", "GPU=2"], "can never fit"),
        (["-r", "GPU=1", "-r", "accelerator_type=H100", "--override", "GPU=2"], "no 'H100'"),
        (["-r", "GPU=1.5", "--override", "GPU=2"], "not whole"),
        (["-r", "GPU=lots"], "'lots' is not a number"),
        (["-r", "GPU"], "is not RES=Q"),
    ],
)
def test_errors_exit_2(
    capsys: pytest.CaptureFixture[str], empty_host: str, argv: list[str], message: str
) -> None:
    code, out, err = run(capsys, *argv, "--host", empty_host)
    assert code == 2 and out == "false\n"  # so that an eval of the output fails too
    assert message in err and err.startswith("accelkit env: error:")


def test_parse_request_and_shell_lines() -> None:
    assert parse_request(["GPU=0.5", "accelerator_type=H100", "custom=2"]) == (
        {"GPU": 0.5, "custom": 2.0},
        "H100",
    )
    assert shell_lines({"A": "x y", "B": None, "C": ""}) == (
        "export A='x y'\nunset B\nexport C=''\n"
    )


def test_eval_in_a_shell(empty_host: str) -> None:
    script = (
        f'eval "$({sys.executable} -m accelkit.cli env -r GPU=1 --override GPU=2 '
        f'--host {empty_host})"; echo "[$CUDA_VISIBLE_DEVICES]"'
    )
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "5,7"}  # this machine's: the node keeps its own
    result = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env=env, check=True
    )
    assert result.stdout == "[0]\n"


def test_a_bad_override_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["env", "-r", "GPU=1", "--override", "GPU"])
    assert exited.value.code == 2
    assert "is not RES=Q" in capsys.readouterr().err


def test_override_reads_quantities_as_requests_do(capsys: pytest.CaptureFixture[str]) -> None:
    """One RES=Q reader: ``--override custom=1/3`` is the exact third ``-r`` would take."""
    assert main(["ls", "--json", "--override", "custom=1/3", "--override", "GPU=2"]) == 0
    resources = json.loads(capsys.readouterr().out)["resources"]
    assert resources["custom"] == 0.3333
    assert resources["GPU"] == 2.0


NODES = Path(__file__).parents[2] / "examples" / "nodes"


def bash_eval(lines: str, names: list[str], env: dict[str, str]) -> dict[str, str]:
    """Run ``eval "$LINES"`` in bash and report each variable's value, or <unset>."""
    script = (
        'eval "$LINES"; for v in ' + " ".join(names) + '; do printf "%s\\0" "${!v-<unset>}"; done'
    )
    result = subprocess.run(
        ["bash", "-c", script],
        capture_output=True,
        text=True,
        env={"PATH": os.environ.get("PATH", ""), **env, "LINES": lines},
        check=True,
    )
    return dict(zip(names, result.stdout.split("\0")))


def test_shell_lines_survive_eval_whatever_the_value() -> None:
    values = {
        "SPACED": "a b",
        "QUOTE": 'it\'s "quoted"',
        "DOLLAR": "$HOME;`id`",
        "NEWLINE": "one\ntwo",
        "EMPTY": "",
        "GLOB": "*",
    }
    lines = shell_lines({**values, "GONE": None})
    seen = bash_eval(lines, [*values, "GONE"], {"GONE": "inherited"})
    assert seen == {**values, "GONE": "<unset>"}


def test_shell_lines_refuse_names_eval_would_misread() -> None:
    with pytest.raises(ValueError, match="cannot print"):
        shell_lines({"A;rm -rf x": "1"})


def cli(*argv: str, env: dict[str, str]) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "accelkit.cli", "env", *argv],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return result.stdout


def clean_env(**extra: str) -> dict[str, str]:
    """The session's environment (which has no accelerator variables: tests/conftest.py) and
    ``extra``."""
    return {**os.environ, **extra}


def test_eval_unsets_for_a_whole_tpu_host(empty_host: str) -> None:
    env = clean_env(TPU_HOST_BOUNDS="9,9,9")
    lines = cli("-r", "TPU=4", "--override", "TPU=4", "--host", empty_host, env=env)
    assert "unset TPU_HOST_BOUNDS" in lines.splitlines()
    seen = bash_eval(lines, ["TPU_VISIBLE_CHIPS", "TPU_HOST_BOUNDS"], env)
    assert seen == {"TPU_VISIBLE_CHIPS": "<unset>", "TPU_HOST_BOUNDS": "<unset>"}


@pytest.mark.skipif(not (NODES / "nvidia-h100-8gpu").is_dir(), reason="example node missing")
def test_eval_a_typed_fraction_on_a_snapshot() -> None:
    env = clean_env(CUDA_VISIBLE_DEVICES="7")
    lines = cli(
        "-r",
        "GPU=0.5",
        "-r",
        "accelerator_type=H100",
        "--host",
        str(NODES / "nvidia-h100-8gpu"),
        env=env,
    )
    seen = bash_eval(lines, ["CUDA_VISIBLE_DEVICES", "XLA_PYTHON_CLIENT_MEM_FRACTION"], env)
    # the shell's CUDA_VISIBLE_DEVICES=7 is this machine's: the replayed node offers all 8 GPUs
    assert seen == {"CUDA_VISIBLE_DEVICES": "0", "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.5"}


def test_a_resource_given_twice_is_an_error(
    capsys: pytest.CaptureFixture[str], empty_host: str
) -> None:
    code, out, err = run(
        capsys, "-r", "GPU=1", "-r", "GPU=0.5", "--override", "GPU=2", "--host", empty_host
    )
    assert code == 2 and out == "false\n"  # so that an eval of the output fails too
    assert "GPU is requested twice" in err


def slurm_task_env(output: str, env: dict[str, str]) -> dict[str, str]:
    """``env`` as a task gets it after a TaskProlog printed ``output``, read as slurmstepd reads
    it (src/slurmd/slurmstepd/task.c, ``_proc_stdout``):

        } else if (!xstrncmp(buf_ptr, "export ",7)) {
            name_ptr = buf_ptr + 7;
            while (isspace(name_ptr[0])) name_ptr++;
            equal_ptr = strchr(name_ptr, '=');
            ...
            val_ptr = equal_ptr + 1;
            while (isspace(equal_ptr[-1])) equal_ptr--;
            ...
            if (setenvf(env, name_ptr, "%s", val_ptr)) {
        } else if (!xstrncmp(buf_ptr, "unset ", 6)) {
            ... unsetenvp(*env, name_ptr);

    The value is the rest of the line, verbatim: nothing unquotes it."""
    task = dict(env)
    for line in output.split("\n"):
        if line.startswith("export "):
            name, equal, value = line[7:].lstrip().partition("=")
            if equal:
                task[name.rstrip()] = value
        elif line.startswith("unset "):
            task.pop(line[6:].strip(), None)
    return task


@pytest.mark.parametrize(
    ("node", "request_"),
    [
        ("intel-max1550-4gpu", "GPU=0"),
        ("amd-mi300x-8gpu", "GPU=0"),
        ("mixed-nvidia-ascend", "NPU=1"),
    ],
)
def test_taskprolog_lines_give_the_task_the_grants_values(
    capsys: pytest.CaptureFixture[str], node: str, request_: str
) -> None:
    argv = ["-r", request_, "--hide-others", "--host", str(NODES / node)]
    wanted = json.loads(run(capsys, *argv, "--json")[1])["env"]
    assert "" in wanted.values() or any(";" in str(v) for v in wanted.values())  # quoted by shell
    code, out, _ = run(capsys, *argv, "--format", "taskprolog")
    assert code == 0
    task = slurm_task_env(out, {name: "stale" for name in wanted})
    assert task == {name: value for name, value in wanted.items() if value is not None}


def test_taskprolog_lines_refuse_a_value_with_a_newline() -> None:
    assert taskprolog_lines({"A": "x y", "B": None, "C": "", "D": "!a;b"}) == (
        "export A=x y\nunset B\nexport C=\nexport D=!a;b\n"
    )
    with pytest.raises(ValueError, match="newline"):
        taskprolog_lines({"A": "0\nexport B=1"})
    with pytest.raises(ValueError, match="shell variables"):
        taskprolog_lines({"A B": "0"})
