"""``CUDA_VISIBLE_DEVICES`` against the CUDA driver: values measured on a real H100 and H200.

``data/h100-cuda-visible-devices.json`` (36 values) and ``data/h200-cuda-visible-devices.json``
(74 more) hold what ``cuInit`` + ``cuDeviceGetCount`` showed a fresh process under each value
(driver 580, CUDA 13, one GPU each); ``examples/nodes/nvidia-h100-1gpu`` and
``examples/nodes/nvidia-h200-1gpu`` are those machines' snapshots. A node detected from the
snapshot under the same value must offer exactly the GPUs the driver showed, and only where CUDA
refused to start (``cuInit`` 101, a GPU named twice) is there an error to report. One measured
value is read differently on purpose (``cuda_visible``'s module says why), and is tested as such.
"""

from __future__ import annotations

import ctypes
import json
from pathlib import Path
from typing import Any, Optional
from uuid import UUID

import accelkit
import pytest
from accelkit.host import load_snapshot
from accelkit_plugins.nvidia import NvidiaManager
from accelkit_plugins.nvidia.cuda_visible import names_uuid
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data"
MACHINES = {
    name: (ROOT / "examples" / "nodes" / f"nvidia-{name}-1gpu", json.loads(table.read_text()))
    for name in ("h100", "h200")
    for table in [DATA / f"{name}-cuda-visible-devices.json"]
}
H100, H100_TABLE = MACHINES["h100"]
GPU_UUID: str = H100_TABLE["gpu_uuid"]
ROWS = [(name, row) for name, (_, table) in MACHINES.items() for row in table["rows"]]
CUDA_ERROR_INVALID_DEVICE = 101
READ_CAUTIOUSLY = {
    ("h200", "0,1,0"),
    ("h200", "0,2,0"),
    ("h200", "GPU-409195b0,GPU-ffffffff,GPU-409195b0"),
}
"""Measured values read differently on purpose: the GPU named twice, after a token that names no
GPU of this machine (CUDA stops there and shows it); refused here, as ``cuda_visible`` says."""
SHOWN = [
    (name, row["CUDA_VISIBLE_DEVICES"])
    for name, row in ROWS
    if row["cuda_device_count"] and (name, row["CUDA_VISIBLE_DEVICES"]) not in READ_CAUTIOUSLY
]


def detected(value: Optional[str], machine: str = "h100") -> accelkit.Node:
    """The machine's node as a process with ``CUDA_VISIBLE_DEVICES=value`` (None: unset) detects
    it."""
    env = {} if value is None else {"CUDA_VISIBLE_DEVICES": value}
    builtins = accelkit.Registry(autoload=False)  # not what else this machine has installed
    return accelkit.detect_node(load_snapshot(MACHINES[machine][0], env=env), registry=builtins)


def errors_of(node: accelkit.Node) -> list[str]:
    return [d.message for d in node.diagnostics if d.family == "nvidia" and d.level == "error"]


def test_the_tables_are_the_measured_ones() -> None:
    for name, count in (("h100", 36), ("h200", 74)):
        rows = MACHINES[name][1]["rows"]
        assert len(rows) == count
        assert len({row["CUDA_VISIBLE_DEVICES"] for row in rows}) == count
        assert [d.uuid for d in detected(None, name).devices] == [MACHINES[name][1]["gpu_uuid"]]
    h100_values = {row["CUDA_VISIBLE_DEVICES"] for row in H100_TABLE["rows"]}
    assert not h100_values & {row["CUDA_VISIBLE_DEVICES"] for _, row in ROWS if _ == "h200"}


@pytest.mark.parametrize(
    ("machine", "row"), ROWS, ids=[f"{name}:{row['CUDA_VISIBLE_DEVICES']!r}" for name, row in ROWS]
)
def test_the_node_offers_what_the_cuda_driver_showed(machine: str, row: dict[str, Any]) -> None:
    value = row["CUDA_VISIBLE_DEVICES"]
    node = detected(value, machine)
    if (machine, value) in READ_CAUTIOUSLY:
        assert row["cuda_device_count"] == 1 and row["cuInit"] == 0
        assert node.devices == [] and errors_of(node), "refused, offering less than CUDA shows"
        return
    count = row["cuda_device_count"]
    assert node.resources.get("GPU", 0) == count
    assert [d.uuid for d in node.devices] == [MACHINES[machine][1]["gpu_uuid"]] * count
    assert bool(errors_of(node)) == (row["cuInit"] == CUDA_ERROR_INVALID_DEVICE), errors_of(node)


@pytest.mark.parametrize(("machine", "value"), SHOWN, ids=[f"{m}:{v!r}" for m, v in SHOWN])
def test_a_grant_on_that_node_writes_an_id_cuda_reads_as_the_gpu(
    machine: str, value: Optional[str]
) -> None:
    """The id a visible GPU keeps is one CUDA reads back as that GPU (``"0x0"`` becomes ``"0"``;
    a UUID or its prefix stays as written), never whitespace or a sign."""
    node = detected(value, machine)
    grant = accelkit.Allocator(node).acquire({"GPU": 1})
    assert grant is not None
    written = grant.env()["CUDA_VISIBLE_DEVICES"]
    uuid = MACHINES[machine][1]["gpu_uuid"]
    first = (value or "").split(",")[0]
    assert written == "0" or written == first[: len(written)]
    assert [d.uuid for d in detected(written, machine).devices] == [uuid]


@pytest.mark.parametrize(
    ("value", "ids"),
    [
        ("+0", ["0"]),
        ("-0", ["0"]),
        ("0x0", ["0"]),
        ("0.0", ["0"]),
        ("00", ["0"]),
        (" \t0 ", ["0"]),
        ("0abc,1", ["0", "1"]),
        ("3, 1", ["3", "1"]),
        ("0 1", ["0"]),  # only a comma parts tokens
        (",0", []),
        ("0,,1", ["0"]),
        ("0,-1,1", ["0"]),
        ("\u0660", []),
        ("4294967296", ["0"]),  # an int keeps the low 32 bits
        ("4294967299", ["3"]),
        ("-4294967295", ["1"]),
        ("2147483648", []),  # negative as an int
        ("9223372036854775808", ["0"]),  # strtoul, not strtol: a 64-bit unsigned long
        ("18446744073709551615", []),  # all ones: -1
        ("18446744073709551616", []),  # past 64 bits: all ones
        ("-9223372036854775808", ["0"]),
        ("-9223372036854775809", []),  # the low 32 bits all ones
        ("1" * 40, []),  # read without int()'s size limit
        ("-" + "1" * 40, []),
        ("--0", []),  # one sign
        ("\v0", ["0"]),
        ("0,GPU-f40d497e,1", ["0"]),  # a list of ordinals ends at a UUID
        ("GPU-f40d497e,0,GPU-ab", ["GPU-f40d497e"]),  # and one of UUIDs at an ordinal
        ("GPU-f40d497e,MIG-ab", ["GPU-f40d497e", "MIG-ab"]),  # either word, in one list
        ("GPU-f40d497e,MIG-zz,GPU-ab", ["GPU-f40d497e"]),  # ends at a token CUDA cannot use
        # read up to the 32nd digit, which is the id kept: one that can be written back
        ("GPU-f40d497e-eb82-687e-eed4-f1e8e1b7361az", ["GPU-f40d497e-eb82-687e-eed4-f1e8e1b7361a"]),
        (
            "GPU-f40d497e-eb82-687e-eed4-f1e8e1b7361a/0/0",
            ["GPU-f40d497e-eb82-687e-eed4-f1e8e1b7361a"],
        ),
        (
            "GPU-f40d497e-eb82-687e-eed4-f1e8e1b7361a x",
            ["GPU-f40d497e-eb82-687e-eed4-f1e8e1b7361a"],
        ),
        ("GPU-f40d497ez", []),  # not past 32 digits: the token names nothing
        ("MIG-ab,MIG-cd", ["MIG-ab", "MIG-cd"]),
        ("GPU-F40D497E", ["GPU-F40D497E"]),
        ("GPU-f40d497eeb82", ["GPU-f40d497eeb82"]),  # dashes anywhere: the digits are compared
        ("GPU--f40d-497e-", ["GPU--f40d-497e-"]),
        ("gpu-f40d497e", []),  # the word in capitals
        ("Gpu-f40d497e", []),
        (" GPU-f40d497e", []),
        ("GPU-f40d497e ", []),
        ("GPU-", []),
        ("GPU---", []),
        ("MIG-GPU-f40d497e/0/0", ["MIG-GPU-f40d497e/0/0"]),  # before R470: an id taken whole
        ("MIG-GPU-f40d497e", []),
    ],
)
def test_tokens_are_read_as_cuda_reads_them(value: str, ids: list[str]) -> None:
    assert NvidiaManager().read_visible({"CUDA_VISIBLE_DEVICES": value}) == ids


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ("0,0", "GPU 0 is named twice ('0' and '0')"),
        ("1,01", "GPU 1 is named twice ('1' and '01')"),
        ("0, 0", "GPU 0 is named twice ('0' and ' 0')"),
        ("0x0,+0", "GPU 0 is named twice ('0x0' and '+0')"),
        ("0,4294967296", "GPU 0 is named twice ('0' and '4294967296')"),
        ("GPU-ab,GPU-AB", "the same GPU is named twice ('GPU-ab' and 'GPU-AB')"),
        ("GPU-abcd,GPU-ab-cd-ef", "the same GPU is named twice ('GPU-abcd' and 'GPU-ab-cd-ef')"),
        ("MIG-ab12,MIG-ab", "the same GPU is named twice ('MIG-ab12' and 'MIG-ab')"),
        ("GPU-ab,MIG-AB12", "the same GPU is named twice ('GPU-ab' and 'MIG-AB12')"),
    ],
)
def test_a_gpu_named_twice_is_refused_as_cuda_refuses_it(value: str, named: str) -> None:
    with pytest.raises(ValueError) as refused:
        NvidiaManager().read_visible({"CUDA_VISIBLE_DEVICES": value})
    assert str(refused.value) == (
        f"{named}; CUDA then fails to initialise (CUDA_ERROR_INVALID_DEVICE) and the process sees "
        "no GPU: name each GPU once"
    )


def test_a_list_of_any_length_is_read_in_one_step_per_token() -> None:
    """Every token is checked against those before it by lookups, not by comparing pairs: a
    list of 50,000 tokens took minutes when each was compared with every earlier one."""
    ordinals = ",".join(str(n) for n in range(50_000))
    uuids = ",".join(f"GPU-{n:08x}" for n in range(50_000))
    for value in (ordinals, uuids):
        read = NvidiaManager().read_visible({"CUDA_VISIBLE_DEVICES": value})
        assert read == value.split(",")


def test_uuids_that_name_different_gpus_are_no_repeat() -> None:
    assert NvidiaManager().read_visible({"CUDA_VISIBLE_DEVICES": "GPU-ab,GPU-ac"}) == [
        "GPU-ab",
        "GPU-ac",
    ]


@pytest.mark.parametrize(
    "token",
    [
        "GPU-409195b0-0254-0c08-ec13-532726f0a676",
        "GPU-409195B00254",
        "MIG-409195b0",
        "GPU-4",
        "GPU--409195b0-",
        "GPU-409195b0-0254-0c08-ec13-532726f0a6760",
    ],
)
def test_uuid_digits_are_compared_as_the_driver_compares_them(token: str) -> None:
    """Measured on the H200: its UUID's digits in any case, dashes anywhere, more than 32 digits
    (the rest ignored), and the word ``MIG`` all name the GPU."""
    gpu = detected(None, "h200").devices[0]
    assert NvidiaManager().matches(token, gpu)


@pytest.mark.parametrize("token", ["GPU-409195b1", "GPU-", "GPU-409195b0 ", "GPU-409195b0z"])
def test_other_tokens_name_no_gpu(token: str) -> None:
    gpu = detected(None, "h200").devices[0]
    assert not NvidiaManager().matches(token, gpu)


def test_an_operators_exclusion_names_a_uuid_in_any_case() -> None:
    """``gpu-...`` is no UUID in a list of CUDA's, but an operator who writes one in
    ``ACCELKIT_EXCLUDE_DEVICES`` means the GPU: the exclusion held before the reading was
    measured, and must not fail open (the re-review found it did)."""
    env = {"ACCELKIT_EXCLUDE_DEVICES": "nvidia:gpu-409195b0-0254-0c08-ec13-532726f0a676"}
    builtins = accelkit.Registry(autoload=False)
    node = accelkit.detect_node(load_snapshot(MACHINES["h200"][0], env=env), registry=builtins)
    assert node.devices == []


def test_a_token_that_names_no_gpu_ends_the_list_with_a_warning() -> None:
    node = detected("0,3,1")
    assert [d.id for d in node.devices] == ["0"]
    assert [d.message for d in node.diagnostics if d.level == "warning"] == [
        "CUDA_VISIBLE_DEVICES names '3', which matches no detected device by id, UUID or index; "
        "the runtime stops reading the list there, leaving out '3', '1' (name only devices this "
        "node has)"
    ]


def test_the_double_ordinal_error_names_the_value_and_the_fix() -> None:
    errors = [d.message for d in detected("0,0").diagnostics if d.level == "error"]
    assert errors == [
        "cannot read CUDA_VISIBLE_DEVICES='0,0': GPU 0 is named twice ('0' and '0'); CUDA then "
        "fails to initialise (CUDA_ERROR_INVALID_DEVICE) and the process sees no GPU: name each "
        "GPU once; treating it as nothing visible (fix or unset the variable)"
    ]


def test_a_uuid_and_the_same_gpus_ordinal_end_each_others_list() -> None:
    """Measured: ``UUID,0`` and ``0,UUID`` show the GPU once, with no error: each list ends at
    the other kind of token, before it could name the GPU twice."""
    for value in (f"{GPU_UUID},0", f"0,{GPU_UUID}", f"{GPU_UUID},0,0"):
        node = detected(value)
        assert [d.uuid for d in node.devices] == [GPU_UUID]
        assert not errors_of(node)
        assert not [d for d in node.diagnostics if d.level == "warning"]


def _libc_strtoul() -> Any:
    """C's own ``strtoul``, the reading the driver's ordinals matched on both machines."""
    strtoul = ctypes.CDLL(None).strtoul
    strtoul.restype = ctypes.c_ulong
    strtoul.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_int]
    return strtoul


ORDINAL_TEXT = st.text(" \t\n\v\f\r+-0123456789xa.\u0660", max_size=30) | st.integers(
    min_value=-(2**70), max_value=2**70
).map(str)


@settings(max_examples=400)
@given(ORDINAL_TEXT)
def test_an_ordinal_reads_as_c_strtoul_into_an_int_reads_it(token: str) -> None:
    """An independent oracle for every ordinal token: libc's ``strtoul``, its result kept as a
    C ``int`` (what the driver does with it, by the values measured); a token with no digits,
    or a negative ``int``, ends the list."""
    text = ctypes.create_string_buffer(token.encode())
    end = ctypes.c_char_p()
    number = ctypes.c_int(_libc_strtoul()(text, ctypes.byref(end), 10)).value
    consumed = ctypes.cast(end, ctypes.c_void_p).value != ctypes.addressof(text)
    read = NvidiaManager().read_visible({"CUDA_VISIBLE_DEVICES": token})
    assert read == ([str(number)] if consumed and number >= 0 else [])


@given(
    st.uuids(),
    st.integers(min_value=1, max_value=32),
    st.lists(st.booleans(), min_size=32, max_size=32),
    st.lists(st.booleans(), min_size=32, max_size=32),
    st.sampled_from(["GPU-", "MIG-"]),
)
def test_any_spelling_of_a_uuids_first_digits_names_it(
    uuid: UUID, digits: int, dashes: list[bool], capitals: list[bool], word: str
) -> None:
    """Dashes anywhere, either case, either word, any number of the first digits: the driver's
    reading, as measured on the H200; a character that is neither, before the 32nd digit,
    names nothing. The word in lower case is no UUID to CUDA, only to an operator."""
    device_uuid = f"GPU-{uuid}"
    spelled = "".join(
        ("-" if dash else "") + (char.upper() if capital else char)
        for char, dash, capital in zip(uuid.hex[:digits], dashes, capitals)
    )
    assert names_uuid(word + spelled, device_uuid)
    if digits < 32:
        assert not names_uuid(word + spelled + " ", device_uuid)
        assert not names_uuid(word + spelled + "z", device_uuid)
    assert names_uuid(word.lower() + spelled, device_uuid)  # an operator's spelling too
    assert NvidiaManager().read_visible({"CUDA_VISIBLE_DEVICES": word.lower() + spelled}) == []


def test_an_ordinal_may_have_any_number_of_leading_zeros() -> None:
    """``strtoul`` reads them all; Python's ``int()`` refuses more than 4300 digits."""
    assert NvidiaManager().read_visible({"CUDA_VISIBLE_DEVICES": "0" * 5000 + "1"}) == ["1"]


def test_a_gpu_uuid_word_names_no_mig_instance() -> None:
    """Measured with MIG off only: ``MIG-`` with a GPU's digits names the GPU; ``GPU-`` with an
    instance's digits is not known to name the instance, so it names none here."""
    gpu = detected(None, "h200").devices[0]
    instance = gpu.replace(id="MIG-409195b0", uuid="MIG-aaaa1111-2222", parent="0")
    assert NvidiaManager().matches("MIG-aaaa1111", instance)
    assert not NvidiaManager().matches("GPU-aaaa1111", instance)


def test_a_uuid_with_more_after_its_32nd_digit_is_the_gpu_and_a_grant_writes_its_uuid() -> None:
    """CUDA reads no further than the 32nd digit (measured: ``GPU-<uuid>z``, ``GPU-<uuid>/0/0``),
    so white space there too names the GPU; kept as written, the id could not be written back,
    and the value was refused (an error, nothing visible)."""
    uuid = MACHINES["h200"][1]["gpu_uuid"]
    node = detected(f"{uuid} x", "h200")
    assert [d.uuid for d in node.devices] == [uuid] and not errors_of(node)
    grant = accelkit.Allocator(node).acquire({"GPU": 1})
    assert grant is not None and grant.env()["CUDA_VISIBLE_DEVICES"] == uuid
