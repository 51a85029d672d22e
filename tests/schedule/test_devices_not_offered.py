"""Devices a family's runtime counts but no worker may use (``Device.offered`` False): detection
never puts them in a node (``tests/node``), and a node built by hand that holds one never grants
it."""

from __future__ import annotations

import json

import pytest
from accelkit import Allocator, Device, Node
from sched_nodes import devices


def test_offered_travels_in_json_and_only_when_false() -> None:
    usable, prohibited = devices("nvidia", 2)
    prohibited = prohibited.replace(offered=False)
    assert "offered" not in usable.to_dict()  # every node so far reads as before
    assert prohibited.to_dict()["offered"] is False
    again = [Device.from_dict(json.loads(json.dumps(d.to_dict()))) for d in (usable, prohibited)]
    assert again == [usable, prohibited]
    assert Device.from_dict({"id": "0"}).offered is True


def test_offered_is_a_bool() -> None:
    with pytest.raises(ValueError, match="Device offered must be True or False"):
        Device("0", offered=0)  # type: ignore[arg-type]


def test_a_node_built_by_hand_never_grants_a_device_not_offered() -> None:
    usable, prohibited = devices("nvidia", 2)
    node = Node(devices=[usable, prohibited.replace(offered=False)], resources={"GPU": 1.0})
    alloc = Allocator(Node.from_dict(node.to_dict()))
    grant = alloc.acquire({"GPU": 1})
    assert grant is not None and grant.ids == {"GPU": ["0"]}
    assert alloc.acquire({"GPU": 0.5}) is None
