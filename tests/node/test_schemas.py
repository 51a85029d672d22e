"""The JSON formats are documented as JSON Schemas in ``docs/schemas``; what accelkit writes
validates against them, and what the schemas refuse, the readers refuse too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import accelkit
import pytest
from accelkit.host import load_snapshot
from accelkit.node._snapshot import record_snapshot

jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is in the test extra")

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "docs" / "schemas"
NODES = sorted(p for p in (ROOT / "examples" / "nodes").iterdir() if p.is_dir())


def validator(name: str) -> Any:
    schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("node_dir", NODES, ids=lambda p: p.name)
def test_every_example_node_its_grants_and_its_manifest_validate(node_dir: Path) -> None:
    node = accelkit.detect_node(load_snapshot(node_dir))
    data = node.to_dict()
    validator("node").validate(data)
    assert accelkit.Node.from_dict(json.loads(json.dumps(data))) == node
    validator("snapshot").validate(json.loads((node_dir / "snapshot.json").read_text()))
    allocator = accelkit.Allocator(node)
    for resource in {d.resource_name for d in node.devices}:
        grant = allocator.acquire({resource: 1})
        assert grant is not None
        validator("grant").validate(grant.to_dict())
        assert accelkit.Grant.from_dict(grant.to_dict()) == grant


def test_a_fresh_snapshot_manifest_validates(tmp_path: Path) -> None:
    host = accelkit.FakeHost(env={"CUDA_VISIBLE_DEVICES": "0"}, commands={})
    record_snapshot(tmp_path / "snap", host)
    validator("snapshot").validate(json.loads((tmp_path / "snap" / "snapshot.json").read_text()))


@pytest.mark.parametrize("flag", [{"exclusive": True}, {"offered": False}])
def test_a_device_flag_validates_and_reads_back_where_written(flag: dict[str, bool]) -> None:
    node = accelkit.detect_node(load_snapshot(ROOT / "examples" / "nodes" / "nvidia-h100-1gpu"))
    node.devices = [node.devices[0].replace(**flag)]  # a node built by hand may hold either
    data = node.to_dict()
    assert data["devices"][0].items() >= flag.items()
    validator("node").validate(data)
    assert accelkit.Node.from_dict(json.loads(json.dumps(data))) == node
    data["devices"][0].update({name: "yes" for name in flag})
    assert not validator("node").is_valid(data)
    with pytest.raises(ValueError, match="must be True or False"):
        accelkit.Node.from_dict(data)


def grant_dict() -> dict[str, Any]:
    node = accelkit.detect_node(load_snapshot(ROOT / "examples" / "nodes" / "nvidia-h100-8gpu"))
    grant = accelkit.Allocator(node).acquire({"GPU": 0.5})
    assert grant is not None
    return grant.to_dict()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(colour="green"), "a grant has unknown keys"),
        (lambda d: d.update(schema_version=2), "grant schema_version 2 is not supported"),
        (lambda d: d.pop("schema_version"), r"a grant lacks the keys \[.schema_version.\]"),
        (lambda d: d.pop("family_sizes"), "lacks the keys"),
        (lambda d: d["devices"][0].update(extra=1), "a granted device has unknown keys"),
        (lambda d: d.update(token="7"), "token must be a whole number"),
    ],
)
def test_grants_refuse_what_the_schema_refuses(change: Any, message: str) -> None:
    data = grant_dict()
    change(data)
    assert not validator("grant").is_valid(data)
    with pytest.raises(ValueError, match=message):
        accelkit.Grant.from_dict(data)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(colour="green"), "has unknown keys"),
        (lambda d: d["commands"][0].update(returncode="0"), "needs a whole-number returncode"),
        (lambda d: d["commands"][0].update(argv=[]), "argv must be a list of strings"),
        (lambda d: d.update(env={"X": 1}), "env must be an object"),
    ],
)
def test_snapshots_refuse_what_the_schema_refuses(
    change: Any, message: str, tmp_path: Path
) -> None:
    source = ROOT / "examples" / "nodes" / "nvidia-h100-8gpu" / "snapshot.json"
    data = json.loads(source.read_text())
    change(data)
    assert not validator("snapshot").is_valid(data)
    (tmp_path / "snapshot.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match=message):
        load_snapshot(tmp_path)
