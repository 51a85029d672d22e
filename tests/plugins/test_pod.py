"""``accelkit.pod``: slice resources and labels from a scheduler's variables."""

from __future__ import annotations

import pytest
from accelkit_plugins.tpu.pod import env_labels, slice_resources


def test_every_worker_offers_the_slice_and_worker_0_the_head() -> None:
    assert slice_resources("s", "0", "H") == {"s": 1.0, "H": 1.0}
    assert slice_resources(" s ", " 3 ", "H") == {"s": 1.0}


@pytest.mark.parametrize(
    ("name", "worker"), [(None, "0"), ("", "0"), ("s", None), ("s", "-1"), ("s", "one")]
)
def test_a_lone_host_is_not_a_slice(name: object, worker: object) -> None:
    assert slice_resources(name, worker, "H") == {}  # type: ignore[arg-type]


def test_env_labels_keep_only_variables_that_say_something() -> None:
    env = {"A": " x ", "B": "  ", "C": "y"}
    assert env_labels(env, {"a": "A", "b": "B", "c": "C", "d": "D"}) == {"a": "x", "c": "y"}
