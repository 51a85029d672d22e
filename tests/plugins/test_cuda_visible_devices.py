"""``CUDA_VISIBLE_DEVICES`` against the CUDA driver: 36 values measured on a real H100.

``data/h100-cuda-visible-devices.json`` holds what ``cuInit`` + ``cuDeviceGetCount`` showed a
fresh process under each value (driver 580, CUDA 13, one GPU); ``examples/nodes/nvidia-h100-1gpu``
is that machine's snapshot. A node detected from the snapshot under the same value must offer
exactly the GPUs the driver showed, and only where CUDA refused to start (``cuInit`` 101, an
ordinal given twice) is there an error to report.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import accelkit
import pytest
from accelkit.host import load_snapshot
from accelkit_plugins.nvidia import NvidiaManager

ROOT = Path(__file__).resolve().parents[2]
H100 = ROOT / "examples" / "nodes" / "nvidia-h100-1gpu"
TABLE = json.loads((Path(__file__).parent / "data" / "h100-cuda-visible-devices.json").read_text())
ROWS: list[dict[str, Any]] = TABLE["rows"]
GPU_UUID: str = TABLE["gpu_uuid"]
SHOWN = [row["CUDA_VISIBLE_DEVICES"] for row in ROWS if row["cuda_device_count"]]
CUDA_ERROR_INVALID_DEVICE = 101


def detected(value: Optional[str]) -> accelkit.Node:
    """The H100 node as a process with ``CUDA_VISIBLE_DEVICES=value`` (None: unset) detects it."""
    env = {} if value is None else {"CUDA_VISIBLE_DEVICES": value}
    builtins = accelkit.Registry(autoload=False)  # not what else this machine has installed
    return accelkit.detect_node(load_snapshot(H100, env=env), registry=builtins)


def test_the_table_is_the_measured_one() -> None:
    assert len(ROWS) == 36
    assert len({row["CUDA_VISIBLE_DEVICES"] for row in ROWS}) == 36
    assert [d.uuid for d in detected(None).devices] == [GPU_UUID]


@pytest.mark.parametrize("row", ROWS, ids=[repr(row["CUDA_VISIBLE_DEVICES"]) for row in ROWS])
def test_the_node_offers_what_the_cuda_driver_showed(row: dict[str, Any]) -> None:
    node = detected(row["CUDA_VISIBLE_DEVICES"])
    assert node.resources.get("GPU", 0) == row["cuda_device_count"]
    assert [d.uuid for d in node.devices] == [GPU_UUID] * row["cuda_device_count"]
    errors = [d.message for d in node.diagnostics if d.family == "nvidia" and d.level == "error"]
    assert bool(errors) == (row["cuInit"] == CUDA_ERROR_INVALID_DEVICE), errors


@pytest.mark.parametrize("value", SHOWN, ids=[repr(value) for value in SHOWN])
def test_a_grant_on_that_node_writes_an_id_cuda_reads_as_the_gpu(value: Optional[str]) -> None:
    """The id a visible GPU keeps is one CUDA reads back as that GPU (``"0x0"`` becomes ``"0"``;
    a UUID or its prefix stays as written), never whitespace or a sign."""
    node = detected(value)
    grant = accelkit.Allocator(node).acquire({"GPU": 1})
    assert grant is not None
    written = grant.env()["CUDA_VISIBLE_DEVICES"]
    assert written == "0" or GPU_UUID.lower().startswith((written or "").lower())
    assert [d.uuid for d in detected(written).devices] == [GPU_UUID]


@pytest.mark.parametrize(
    ("value", "ids"),
    [
        ("+0", ["0"]),
        ("0x0", ["0"]),
        ("0.0", ["0"]),
        ("00", ["0"]),
        (" \t0 ", ["0"]),
        ("0abc,1", ["0", "1"]),
        ("3, 1", ["3", "1"]),
        (",0", []),
        ("0,,1", ["0"]),
        ("0,-1,1", ["0"]),
        ("-0", []),  # not measured: a sign other than + ends the list, the cautious reading
        ("\u0660", []),
        ("gpu-f40d497e", ["gpu-f40d497e"]),
        ("MIG-ffffffff-0000", ["MIG-ffffffff-0000"]),
        (" GPU-f40d497e", []),  # not measured: no white space around a UUID
        ("GPU-", []),
        ("1" * 40, []),  # a number no GPU has (strtol would clamp it), without int() limits
    ],
)
def test_tokens_are_read_as_cuda_reads_them(value: str, ids: list[str]) -> None:
    assert NvidiaManager().read_visible({"CUDA_VISIBLE_DEVICES": value}) == ids


@pytest.mark.parametrize("value", ["0,0", "1,01", "0,GPU-f40d497e,+0"])
def test_an_ordinal_given_twice_is_refused_as_cuda_refuses_it(value: str) -> None:
    with pytest.raises(ValueError, match=r"named twice.*CUDA_ERROR_INVALID_DEVICE.*name each GPU"):
        NvidiaManager().read_visible({"CUDA_VISIBLE_DEVICES": value})


def test_a_token_that_names_no_gpu_ends_the_list_with_a_warning() -> None:
    node = detected("0,GPU-ffffffff,1")
    assert [d.id for d in node.devices] == ["0"]
    assert [d.message for d in node.diagnostics if d.level == "warning"] == [
        "CUDA_VISIBLE_DEVICES names 'GPU-ffffffff', which matches no detected device by id, "
        "UUID or index; the runtime stops reading the list there, leaving out 'GPU-ffffffff', "
        "'1' (name only devices this node has)"
    ]


def test_the_double_ordinal_error_names_the_value_and_the_fix() -> None:
    errors = [d.message for d in detected("0,0").diagnostics if d.level == "error"]
    assert errors == [
        "cannot read CUDA_VISIBLE_DEVICES='0,0': GPU 0 is named twice ('0' and '0'); CUDA then "
        "fails to initialise (CUDA_ERROR_INVALID_DEVICE) and the process sees no GPU: name each "
        "GPU once; treating it as nothing visible (fix or unset the variable)"
    ]


def test_a_uuid_and_the_same_gpus_ordinal_show_it_once() -> None:
    node = detected(f"{GPU_UUID},0")
    assert [d.id for d in node.devices] == [GPU_UUID]
    assert [d.message for d in node.diagnostics if d.level == "warning"] == [
        "CUDA_VISIBLE_DEVICES names device 0 more than once ('0'); keeping the first"
    ]
