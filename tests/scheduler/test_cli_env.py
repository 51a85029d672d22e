"""`accelkit env`: one grant's environment as shell lines or JSON, on a replayed node."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from accelkit.cli import main
from accelkit.cli.env import parse_request, shell_lines


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
    assert code == 2 and out == ""
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
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCELKIT_")}
    env["CUDA_VISIBLE_DEVICES"] = "7"
    result = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env=env, check=True
    )
    assert result.stdout == "[0]\n"


def test_a_bad_override_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["env", "-r", "GPU=1", "--override", "GPU"])
    assert exited.value.code == 2
    assert "is not RES=N" in capsys.readouterr().err
