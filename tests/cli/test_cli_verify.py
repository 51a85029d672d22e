"""``accelkit verify`` without hardware: a stand-in libcuda (tests/support/fake_libcuda.py) that
answers as the real H100 did under each ``CUDA_VISIBLE_DEVICES`` value, loaded by the verifying
process exactly as the real driver is (``ctypes`` pointers, the driver's function names)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any, Optional

import pytest
from accelkit.cli import main
from accelkit.cli._verify import RUNTIMES, ask, judge

ROOT = Path(__file__).resolve().parents[2]
NODE = ROOT / "examples" / "nodes" / "nvidia-h100-1gpu"
TABLE = ROOT / "tests" / "plugins" / "data" / "h100-cuda-visible-devices.json"
STAND_IN = ROOT / "tests" / "support" / "fake_libcuda.py"
H100 = json.loads(TABLE.read_text())
CUDA = RUNTIMES["nvidia"]


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """This process's environment with the stand-in runtime as libcuda, and no shell restriction
    of the replayed node (a GPU container's ``CUDA_VISIBLE_DEVICES`` describes that machine)."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("FAKE_LIBCUDA_LIE", raising=False)
    monkeypatch.setenv(CUDA.override, str(STAND_IN))
    monkeypatch.setenv("FAKE_LIBCUDA_TABLE", str(TABLE))
    return monkeypatch


def verify(capsys: pytest.CaptureFixture[str], *words: str) -> tuple[int, str, str]:
    code = main(["verify", *words])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("row", H100["rows"], ids=lambda row: repr(row["CUDA_VISIBLE_DEVICES"]))
def test_the_verifying_process_reads_the_runtime_as_the_h100_table_says(
    row: dict[str, Any], stand_in: pytest.MonkeyPatch
) -> None:
    value: Optional[str] = row["CUDA_VISIBLE_DEVICES"]
    saw = ask(CUDA, [str(STAND_IN)], {"CUDA_VISIBLE_DEVICES": value}, timeout=60)
    assert saw["loaded"] and saw["count"] == row["cuda_device_count"], saw
    one = H100["gpu_uuid"][4:].replace("-", "")
    assert saw["uuids"] == [one] * row["cuda_device_count"]
    verdict, _ = judge(CUDA, saw, H100["gpu_uuid"])
    assert verdict == ("ok" if row["cuda_device_count"] == 1 else "MISMATCH")


def test_every_grant_of_the_h100_passes(
    stand_in: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = verify(capsys, "--host", str(NODE))
    assert code == 0, out
    header, row = out.splitlines()[:2]
    assert header.split() == ["FAMILY", "GRANT", "ENV", "RUNTIME", "SAW", "VERDICT"]
    assert row.split() == [
        "nvidia",
        "GPU",
        "0",
        "CUDA_VISIBLE_DEVICES=0",
        "CUDA_DEVICE_ORDER=PCI_BUS_ID",
        "CUDA:",
        "1",
        "device",
        H100["gpu_uuid"],
        "ok",
    ]


def test_json_says_what_was_granted_expected_and_seen(
    stand_in: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = verify(capsys, "--host", str(NODE), "--json")
    assert code == 0
    report = json.loads(out)
    assert report["ok"] is True and report["unchecked"] == []
    (row,) = report["rows"]
    assert row["grant"] == {"GPU": ["0"]}
    assert row["env"] == {"CUDA_VISIBLE_DEVICES": "0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert row["expected"] == {"count": 1, "uuid": H100["gpu_uuid"]}
    assert row["saw"] == {"loaded": True, "count": 1, "uuids": [H100["gpu_uuid"]], "status": "ok"}
    assert row["verdict"] == "ok"


@pytest.mark.parametrize(
    ("lie", "why"),
    [
        ("count=0", "CUDA saw 0 devices, not 1"),
        ("count=2", "CUDA saw 2 devices, not 1"),
        (
            "uuid=GPU-00000000-1111-2222-3333-444444444444",
            f"CUDA saw GPU-00000000-1111-2222-3333-444444444444, not {H100['gpu_uuid']}",
        ),
    ],
)
def test_a_runtime_that_answers_wrongly_is_a_mismatch_and_exit_1(
    lie: str, why: str, stand_in: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stand_in.setenv("FAKE_LIBCUDA_LIE", lie)
    code, out, _ = verify(capsys, "--host", str(NODE))
    assert code == 1
    lines = out.splitlines()
    assert lines[1].startswith("nvidia  GPU 0  CUDA_VISIBLE_DEVICES=0 ")
    assert lines[1].endswith("MISMATCH")
    assert f"  nvidia GPU 0: {why}" in lines


def test_a_node_the_runtime_does_not_match_fails_row_by_row(
    stand_in: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The 8-GPU node's grants against the one H100's runtime: a foreign UUID, a GPU the
    driver does not have, and processes that fail (the stand-in was never run under "2")."""
    code, out, _ = verify(capsys, "--host", str(NODE.with_name("nvidia-h100-8gpu")))
    assert code == 1
    lines = out.splitlines()
    assert [line.split()[-1] for line in lines[1:9]] == ["MISMATCH"] * 2 + ["ERROR"] * 6
    assert "  nvidia GPU 1: CUDA saw 0 devices, not 1 (cuInit returned 100)" in lines
    assert (
        "  nvidia GPU 2: the CUDA process exited with 1: LookupError: the H100 was never run "
        "under CUDA_VISIBLE_DEVICES='2'"
    ) in lines


def test_a_recorded_node_has_no_runtime_to_ask(
    stand_in: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stand_in.delenv(CUDA.override)
    code, out, _ = verify(capsys, "--host", str(NODE), "--json")
    assert code == 0
    (row,) = json.loads(out)["rows"]
    assert (row["verdict"], row["saw"]) == ("not run", None)
    assert "a recorded node has no runtime" in row["reason"]
    code, out, _ = verify(capsys, "--host", str(NODE))
    assert "--host replays a recorded node: it has no runtime to ask, so nothing was run" in out


def test_a_runtime_that_is_not_installed_is_skipped() -> None:
    """The system's library is absent (no driver on this machine): nothing to ask, no failure."""
    saw = {"loaded": False, "status": "libcuda.so.1: cannot open shared object file"}
    assert judge(CUDA, saw, H100["gpu_uuid"]) == (
        "skipped",
        "CUDA is not installed here (libcuda.so.1: cannot open shared object file)",
    )


def test_a_library_named_by_its_variable_that_cannot_be_loaded_fails(
    stand_in: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The user asked for that library: it is an error, not "not installed" (it was exit 0 and
    ``"ok": true`` with nothing checked)."""
    missing = tmp_path / "libcuda.so.1"
    stand_in.setenv(CUDA.override, str(missing))
    code, out, _ = verify(capsys, "--host", str(NODE), "--json")
    answer = json.loads(out)
    (row,) = answer["rows"]
    assert (code, answer["ok"], row["verdict"]) == (1, False, "ERROR")
    assert row["reason"].startswith(f"{CUDA.override}={missing} cannot be loaded ({missing}: ")
    code, out, _ = verify(capsys, "--host", str(NODE))
    assert code == 1
    assert f"  nvidia GPU 0: {CUDA.override}={missing} cannot be loaded ({missing}: " in out


def test_families_without_a_runtime_call_are_named_not_checked(
    stand_in: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = verify(capsys, "--host", str(NODE.with_name("tpu-v6e-8")))
    assert code == 0
    assert out.splitlines() == [
        "Nothing to verify: no device of nvidia, amd on this node.",
        "",
        "Not checked (no runtime device count known): tpu",
    ]


FAKE_DRIVER_C = r"""
#include <stdlib.h>
#include <string.h>
int cuInit(unsigned int flags) {
    const char *value = getenv("CUDA_VISIBLE_DEVICES");
    return value && strcmp(value, "0") != 0 ? 100 : 0;  /* CUDA_ERROR_NO_DEVICE */
}
int cuDeviceGetCount(int *count) { *count = 1; return 0; }
int cuDeviceGet(int *device, int ordinal) { *device = ordinal; return 0; }
int cuDeviceGetUuid_v2(unsigned char *uuid, int device) {
    memcpy(uuid, "\xf4\x0d\x49\x7e\xeb\x82\x68\x7e\xee\xd4\xf1\xe8\xe1\xb7\x36\x1a", 16);
    return 0;
}
"""


def test_a_shared_library_is_called_through_ctypes_as_the_driver_is(tmp_path: Path) -> None:
    """The same calls against a compiled library (the real driver's ABI: int status, out
    pointers), where a C compiler is at hand."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build a stand-in libcuda.so with")
    source, library = tmp_path / "fake.c", tmp_path / "libcuda.so.1"
    source.write_text(FAKE_DRIVER_C)
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    saw = ask(CUDA, [str(library)], {"CUDA_VISIBLE_DEVICES": "0"}, timeout=60)
    assert saw == {
        "loaded": True,
        "count": 1,
        "uuids": [H100["gpu_uuid"][4:].replace("-", "")],
        "status": "ok",
    }
    assert judge(CUDA, saw, H100["gpu_uuid"]) == ("ok", "")
    saw = ask(CUDA, [str(library)], {"CUDA_VISIBLE_DEVICES": "1"}, timeout=60)
    assert saw == {"loaded": True, "count": 0, "uuids": [], "status": "cuInit returned 100"}
