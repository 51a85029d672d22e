"""accelkit-mthreads: the conformance kit, both detection layers, a grant, the recorded node."""

from __future__ import annotations

import json
from pathlib import Path

import accelkit
import accelkit_mthreads
import pytest
from accelkit import FakeHost, load_snapshot
from accelkit.node import record_snapshot
from accelkit.testing import AcceleratorManagerSuite
from accelkit_mthreads import MthreadsManager
from accelkit_mthreads.testing import QUERY_ARGV, gmi_json, make_host, write_pci

NODE = Path(__file__).resolve().parents[1] / "nodes" / "mthreads-s4000-8"


class TestMthreads(AcceleratorManagerSuite):
    """The whole kit: contract, detection, visibility round trip, placement, packaging."""

    manager_class = MthreadsManager

    def make_host(self, count: int, root: Path) -> FakeHost:
        return make_host(count, root)


def test_mthreads_gmi_json_gives_model_uuid_memory_and_bus_id() -> None:
    devices = MthreadsManager().detect(FakeHost(commands={QUERY_ARGV: (0, gmi_json(2))}))
    assert [(d.id, d.type_label, d.memory_bytes, d.pci_bus_id) for d in devices] == [
        ("0", "MTT-S4000", 49152 * 2**20, "0000:12:00.0"),
        ("1", "MTT-S4000", 49152 * 2**20, "0000:13:00.0"),
    ]


SPELLINGS = [
    ("mthreads-gmi", "-q", "--json"),  # what real readers run (SwanLab's moorethreads.py, ...)
    ("mthreads-gmi", "-q", "-j"),
    ("mthreads-gmi", "--query", "--json"),
]


@pytest.mark.parametrize("answering", SPELLINGS)
def test_each_spelling_answers_where_the_others_are_refused(answering: tuple[str, ...]) -> None:
    commands = {argv: (2, "", "unknown option\n") for argv in SPELLINGS}
    commands[answering] = (0, gmi_json(1, "MTT S5000"))
    devices = MthreadsManager().detect(FakeHost(commands=commands))
    assert [(d.id, d.type_label, d.source) for d in devices] == [("0", "MTT-S5000", "command")]


def test_the_spelling_real_readers_run_is_asked_first() -> None:
    host = FakeHost(commands={argv: (0, gmi_json(1)) for argv in SPELLINGS})
    MthreadsManager().detect(host)
    assert [tuple(argv) for argv in host.runs] == [("mthreads-gmi", "-q", "--json")]
    assert QUERY_ARGV == ("mthreads-gmi", "-q", "--json")  # the fakes and the recorded node


def test_pci_display_functions_alone_give_a_count_not_the_audio_ones(tmp_path: Path) -> None:
    write_pci(tmp_path, 2)
    node = accelkit.detect_node(FakeHost(root=tmp_path))
    assert [(d.id, d.pci_bus_id, d.source) for d in node.devices] == [
        ("0", "0000:12:00.0", "sysfs"),
        ("1", "0000:13:00.0", "sysfs"),
    ]


def test_a_grant_writes_musa_visible_devices_that_reads_back(tmp_path: Path) -> None:
    node = accelkit.detect_node(make_host(4, tmp_path))
    allocator = accelkit.Allocator(node)
    shared = allocator.acquire({"GPU": 0.25})
    pair = allocator.acquire({"GPU": 2})
    assert shared is not None and pair is not None
    assert shared.env()["MUSA_VISIBLE_DEVICES"] == "0"
    assert pair.env()["MUSA_VISIBLE_DEVICES"] == "1,2"
    assert accelkit.visible_ids(env=pair.env())["mthreads"] == ["1", "2"]


def test_musa_visible_devices_on_the_node_restricts_what_it_offers(tmp_path: Path) -> None:
    write_pci(tmp_path, 4)
    commands = {QUERY_ARGV: (0, gmi_json(4))}
    node = accelkit.detect_node(FakeHost(tmp_path, {"MUSA_VISIBLE_DEVICES": "2"}, commands))
    assert [(d.family, d.id) for d in node.devices] == [("mthreads", "2")]


def test_the_recorded_node_replays() -> None:
    node = accelkit.detect_node(host=load_snapshot(NODE))
    assert node.resources == {"GPU": 8.0, "accelerator_type:MTT-S4000": 1.0}
    assert node.labels["accelkit/mthreads.count"] == "8"


def test_the_recorded_node_is_what_the_fakes_record(tmp_path: Path) -> None:
    """nodes/ is make_host(8) recorded with this plugin alone: re-recording gives the same."""
    (tmp_path / "root").mkdir()
    plugin = accelkit.Registry([accelkit_mthreads], autoload=False)
    fresh = record_snapshot(tmp_path / "node", make_host(8, tmp_path / "root"), registry=plugin)
    manifest = "snapshot.json"
    assert json.loads((fresh / manifest).read_text()) == json.loads((NODE / manifest).read_text())
    files = sorted(p.relative_to(fresh).as_posix() for p in fresh.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(NODE).as_posix() for p in NODE.rglob("*") if p.is_file())


def test_mthreads_gmi_json_of_another_shape_is_no_answer(tmp_path: Path) -> None:
    # the shape other readers of `mthreads-gmi -q -j` expect must not hide the PCI functions
    write_pci(tmp_path, 2)
    text = json.dumps({"gpus": [{"product_name": "MTT S4000", "memory_total": "49152MiB"}] * 2})
    node = accelkit.detect_node(FakeHost(root=tmp_path, commands={QUERY_ARGV: (0, text)}))
    assert [(d.id, d.source) for d in node.devices] == [("0", "sysfs"), ("1", "sysfs")]
    assert "mthreads-gmi lists a GPU without an index" in " ".join(
        d.message for d in node.diagnostics if d.level == "warning"
    )
