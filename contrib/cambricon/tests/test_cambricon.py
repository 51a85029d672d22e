"""accelkit-cambricon: the conformance kit, both detection layers, CN_VISIBLE_DEVICES and
MLU_VISIBLE_DEVICES as torch_mlu reads them, a grant, the recorded node."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional, Union

import accelkit
import accelkit_cambricon
import pytest
from accelkit import FakeHost, load_snapshot
from accelkit.node import record_snapshot
from accelkit.testing import AcceleratorManagerSuite
from accelkit_cambricon import CambriconManager
from accelkit_cambricon.testing import INFO_ARGV, cnmon_info, make_host, write_devices
from hypothesis import given, settings
from hypothesis import strategies as st

NODE = Path(__file__).resolve().parents[1] / "nodes" / "cambricon-mlu370-x8-8"


class TestCambricon(AcceleratorManagerSuite):
    """The whole kit: contract, detection, visibility round trip, placement, packaging."""

    manager_class = CambriconManager

    def make_host(self, count: int, root: Path) -> FakeHost:
        return make_host(count, root)


def test_cnmon_info_gives_model_uuid_memory_and_bus_id() -> None:
    devices = CambriconManager().detect(FakeHost(commands={INFO_ARGV: (0, cnmon_info(2))}))
    assert [(d.id, d.type_label, d.memory_bytes, d.pci_bus_id, d.uuid) for d in devices] == [
        ("0", "MLU370-X8", 48000 * 2**20, "0000:1a:00.0", "77013006-2457-0000-0000-000000000000"),
        ("1", "MLU370-X8", 48000 * 2**20, "0000:1b:00.0", "77013006-2457-0000-0000-000000000001"),
    ]


def test_a_card_block_without_pci_or_uuid_keeps_its_model() -> None:
    text = "Card 0\n    Product Name                   : MLU370-S4\n    Driver      : v4.20.18\n"
    devices = CambriconManager().detect(FakeHost(commands={INFO_ARGV: (0, text)}))
    assert [(d.id, d.model, d.uuid, d.pci_bus_id) for d in devices] == [
        ("0", "MLU370-S4", None, None)
    ]


def test_device_files_alone_give_a_count_not_the_control_file(tmp_path: Path) -> None:
    write_devices(tmp_path, 2)
    node = accelkit.detect_node(FakeHost(root=tmp_path))
    assert [(d.id, d.source) for d in node.devices] == [("0", "devfs"), ("1", "devfs")]


def test_a_grant_writes_mlu_visible_devices_that_reads_back(tmp_path: Path) -> None:
    node = accelkit.detect_node(make_host(4, tmp_path))
    allocator = accelkit.Allocator(node)
    shared = allocator.acquire({"MLU": 0.5})
    pair = allocator.acquire({"MLU": 2})
    assert shared is not None and pair is not None
    assert shared.env() == {"MLU_VISIBLE_DEVICES": "0", "CN_VISIBLE_DEVICES": None}
    assert pair.env() == {"MLU_VISIBLE_DEVICES": "1,2", "CN_VISIBLE_DEVICES": None}
    assert accelkit.visible_ids(env=pair.env())["cambricon"] == ["1", "2"]


def test_mlu_visible_devices_on_the_node_restricts_what_it_offers(tmp_path: Path) -> None:
    write_devices(tmp_path, 4)
    commands = {INFO_ARGV: (0, cnmon_info(4))}
    node = accelkit.detect_node(FakeHost(tmp_path, {"MLU_VISIBLE_DEVICES": "3,1"}, commands))
    assert [d.id for d in node.devices] == ["3", "1"]


def test_the_recorded_node_replays() -> None:
    node = accelkit.detect_node(host=load_snapshot(NODE))
    assert node.resources == {"MLU": 8.0, "accelerator_type:MLU370-X8": 1.0}
    assert node.labels["accelkit/cambricon.count"] == "8"


def test_the_recorded_node_is_what_the_fakes_record(tmp_path: Path) -> None:
    """nodes/ is make_host(8) recorded with this plugin alone: re-recording gives the same."""
    (tmp_path / "root").mkdir()
    plugin = accelkit.Registry([accelkit_cambricon], autoload=False)
    fresh = record_snapshot(tmp_path / "node", make_host(8, tmp_path / "root"), registry=plugin)
    manifest = "snapshot.json"
    assert json.loads((fresh / manifest).read_text()) == json.loads((NODE / manifest).read_text())
    files = sorted(p.relative_to(fresh).as_posix() for p in fresh.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(NODE).as_posix() for p in NODE.rglob("*") if p.is_file())


def test_cnmon_text_without_a_card_block_is_no_answer(tmp_path: Path) -> None:
    # a text not understood must not hide the MLUs the device files show
    write_devices(tmp_path, 2)
    host = FakeHost(
        root=tmp_path, commands={INFO_ARGV: (0, "MLU 0: MLU370-X8\nMLU 1: MLU370-X8\n")}
    )
    node = accelkit.detect_node(host)
    assert [(d.id, d.source) for d in node.devices] == [("0", "devfs"), ("1", "devfs")]
    assert "cnmon info printed no Card <N> block" in " ".join(
        d.message for d in node.diagnostics if d.level == "warning"
    )


# -- CN_VISIBLE_DEVICES and MLU_VISIBLE_DEVICES, as torch_mlu reads them ---------------------------
# torch_mlu (Cambricon/torch_mlu), torch_mlu/mlu/__init__.py, _parse_visible_devices, and its
# tests, test/mlu/test_mlu_cndev_based_avail.py, TestVisibleDeviceParses.test_env_var_parsing
A_UUID = "33033011-2157-0000-0000-000000000000"
TORCH_MLU_CASES = [
    ("1gpu2,2ampere", []),  # "rest of the string is ignored"
    ("0, 1, 2, -1, 3", ["0", "1", "2"]),  # "Negatives abort parsing"
    ("0, 1, 2, 1", []),  # "Double mention of ordinal returns empty set"
    ("2, +3, -0, 5", ["2"]),  # "Unary pluses and minuses"
    ("one,two,3,4", []),  # "Random string is used as empty set"
    ("4,3,two,one", ["4", "3"]),  # "Random string is used as separator"
    (A_UUID, [A_UUID]),  # "MLU ids are parsed"
    (f"{A_UUID}, 2", [A_UUID]),  # "Ordinals are not included in GPUid set"
]


def mlu_host(root: Path, env: dict[str, str], count: int = 8) -> FakeHost:
    """``count`` MLU370-X8 cards, card 5 with torch_mlu's test UUID, under ``env``."""
    write_devices(root, count)
    text = cnmon_info(count).replace("77013006-2457-0000-0000-000000000005", A_UUID)
    return FakeHost(root, env, {INFO_ARGV: (0, text)})


@pytest.mark.parametrize("variable", ["CN_VISIBLE_DEVICES", "MLU_VISIBLE_DEVICES"])
@pytest.mark.parametrize(("value", "ids"), TORCH_MLU_CASES)
def test_torch_mlus_own_cases_read_the_same(variable: str, value: str, ids: list[str]) -> None:
    assert CambriconManager().read_visible({variable: value}) == ids


@pytest.mark.parametrize("variable", ["CN_VISIBLE_DEVICES", "MLU_VISIBLE_DEVICES"])
@pytest.mark.parametrize(("value", "ids"), TORCH_MLU_CASES)
def test_torch_mlus_own_cases_on_the_node(
    tmp_path: Path, variable: str, value: str, ids: list[str]
) -> None:
    node = accelkit.detect_node(mlu_host(tmp_path, {variable: value}))
    assert [d.id for d in node.devices] == ids
    if ids == [A_UUID]:  # the token named card 5 by its UUID
        assert [d.pci_bus_id for d in node.devices] == ["0000:9d:00.0"]
    if not ids:  # a value that shows nothing by accident says so
        warnings = [d.message for d in node.diagnostics if d.level == "warning"]
        assert any("makes none of the 8 detected device(s) visible" in w for w in warnings)


@pytest.mark.parametrize(
    ("value", "ids"),
    [
        ("", []),
        ("NoDevFiles", []),
        (" 3 ,1", ["3", "1"]),
        ("01,10,007", ["1", "10", "7"]),  # leading zeros read as the number
        ("1,01", []),  # one ordinal twice: nothing
        ("0,,1", ["0"]),  # an empty token is no digit string: the list ends
        ("²,1", []),  # a Unicode digit is no ASCII digit: torch_mlu's isdigit would take it
        ("1,²", ["1"]),
        ("0" * 5000 + "3", ["3"]),  # no int(): Python refuses 4300 digits
        (f"{A_UUID},{A_UUID}", []),  # one UUID twice: nothing
        (f"{A_UUID},5", [A_UUID]),
        (f"{A_UUID}, {A_UUID[:-1]}1", [A_UUID]),  # a token with a space names no MLU
        (f"{A_UUID}, {A_UUID},{A_UUID}", []),  # named twice before the list ends: nothing
        ("0-1", []),  # a "-" in a short value: an index list, and "0-1" ends it
        ("0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,-1", []),  # 37 long with a "-": a UUID list
    ],
)
def test_values_beyond_torch_mlus_cases(value: str, ids: list[str]) -> None:
    assert CambriconManager().read_visible({"CN_VISIBLE_DEVICES": value}) == ids
    assert CambriconManager().read_visible({"MLU_VISIBLE_DEVICES": value}) == ids


@pytest.mark.parametrize(
    ("env", "ids"),
    [
        ({}, None),
        ({"MLU_VISIBLE_DEVICES": "3,1"}, ["3", "1"]),
        ({"CN_VISIBLE_DEVICES": "2"}, ["2"]),
        ({"CN_VISIBLE_DEVICES": "2", "MLU_VISIBLE_DEVICES": "3,1"}, ["2"]),
        ({"CN_VISIBLE_DEVICES": "", "MLU_VISIBLE_DEVICES": "3,1"}, []),  # set, even empty
    ],
)
def test_cn_visible_devices_is_read_first(env: dict[str, str], ids: Optional[list[str]]) -> None:
    assert CambriconManager().read_visible(env) == ids


def test_cn_visible_devices_over_a_different_mlu_visible_devices_is_a_warning(
    tmp_path: Path,
) -> None:
    env = {"CN_VISIBLE_DEVICES": "2", "MLU_VISIBLE_DEVICES": "3,1"}
    node = accelkit.detect_node(mlu_host(tmp_path, env))
    assert [d.id for d in node.devices] == ["2"]
    warnings = [d.message for d in node.diagnostics if d.level == "warning"]
    assert "CN_VISIBLE_DEVICES='2' overrides MLU_VISIBLE_DEVICES='3,1'" in warnings
    same = accelkit.detect_node(mlu_host(tmp_path / "same", {**env, "MLU_VISIBLE_DEVICES": "2"}))
    assert not [d for d in same.diagnostics if d.level == "warning"]


def test_uuid_tokens_name_cards_by_cnmons_uuid_exactly(tmp_path: Path) -> None:
    """Each token names the card whose UUID it is, in the variable's order; the first naming no
    card (another case, a prefix) ends the list, as torch_mlu's ``_transform_uuid_to_ordinals``
    ends it."""
    card = "77013006-2457-0000-0000-00000000000{}".format
    value = f"{card(3)},{A_UUID},{A_UUID.upper().replace('0', 'O')},{card(1)}"
    node = accelkit.detect_node(mlu_host(tmp_path, {"MLU_VISIBLE_DEVICES": value}))
    assert [(d.id, d.pci_bus_id) for d in node.devices] == [
        (card(3), "0000:3e:00.0"),
        (A_UUID, "0000:9d:00.0"),
    ]
    short = accelkit.detect_node(mlu_host(tmp_path / "b", {"CN_VISIBLE_DEVICES": card(2)[:-1]}))
    assert short.devices == []  # a prefix is no UUID here (CUDA's prefixes are not torch_mlu's)


def test_a_grant_unsets_an_inherited_cn_visible_devices(tmp_path: Path) -> None:
    """CN_VISIBLE_DEVICES is read first: one left from the node would override the grant's
    MLU_VISIBLE_DEVICES, so the grant unsets it and its worker sees the granted MLUs."""
    node = accelkit.detect_node(mlu_host(tmp_path, {}))
    grant = accelkit.Allocator(node).acquire({"MLU": 2})
    assert grant is not None
    inherited: dict[str, str] = {"CN_VISIBLE_DEVICES": "7"}
    worker = {**inherited, **{k: v for k, v in grant.env().items() if v is not None}}
    for name in [k for k, v in grant.env().items() if v is None]:
        del worker[name]
    assert worker == {"MLU_VISIBLE_DEVICES": "0,1"}
    assert accelkit.visible_ids(env=worker)["cambricon"] == ["0", "1"]
    assert CambriconManager().env_vars_read == ("MLU_VISIBLE_DEVICES", "CN_VISIBLE_DEVICES")


def torch_mlus_reading(env: dict[str, str]) -> Optional[list[Union[int, str]]]:
    """torch_mlu's ``_parse_visible_devices`` (r2.3_develop) as written, ``str.isdigit`` made
    ASCII-only, then what ``_transform_uuid_to_ordinals`` does to a UUID token with a space in it
    (cndev's UUIDs hold none: the list ends there)."""
    var = env.get("CN_VISIBLE_DEVICES")
    if var is None:
        var = env.get("MLU_VISIBLE_DEVICES")
    if var is None:
        return None
    if "-" in var and len(var) >= 36:
        rcs: list[Union[int, str]] = []
        for elem in var.split(","):
            if elem in rcs:
                return []
            if "-" not in elem:
                break
            rcs.append(elem)
        kept: list[Union[int, str]] = []
        for elem in rcs:  # what _transform_uuid_to_ordinals keeps of them, before any lookup
            if any(character.isspace() for character in str(elem)):
                break
            kept.append(elem)
        return kept
    rc: list[Union[int, str]] = []
    for elem in var.split(","):
        token = elem.strip()
        x = int(token) if token.isascii() and token.isdigit() else -1
        if x in rc:
            return []
        if x < 0:
            break
        rc.append(x)
    return rc


TOKENS = st.sampled_from(
    ["0", "1", "01", "7", " 2 ", "", "-1", "+3", "x", "²", A_UUID, f" {A_UUID}"]
)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["CN_VISIBLE_DEVICES", "MLU_VISIBLE_DEVICES"]),
        st.one_of(st.lists(TOKENS, max_size=6).map(",".join), st.text(max_size=40)),
    )
)
def test_any_value_reads_as_torch_mlu_reads_it(env: dict[str, str]) -> None:
    expected = torch_mlus_reading(env)
    ids = CambriconManager().read_visible(env)
    assert ids == (None if expected is None else [str(i) for i in expected])
