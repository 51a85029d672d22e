"""Properties: the ledger decides exactly as one allocator would, and reads no file wrongly."""

from __future__ import annotations

import json
from pathlib import Path

from accelkit import Allocator, LedgerError, Node
from accelkit.ledger._holder import boot_id
from accelkit.ledger._ledger import Ledger
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

QUANTITIES = st.sampled_from([0.25, 0.5, 1, 2, 3])
OPS = st.lists(st.tuples(st.booleans(), QUANTITIES, st.integers(0, 20)), max_size=25)


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=OPS)
def test_ledger_decides_as_one_allocator(tmp_path: Path, h100: Node, ops: list) -> None:
    path = tmp_path / f"ledger-{len(list(tmp_path.iterdir()))}.json"
    # Two ledger objects on one file stand for two processes taking turns.
    ledgers = [Ledger(path, h100), Ledger(path, h100)]
    reference = Allocator(h100)
    held: list[tuple[object, object]] = []
    for turn, (release, quantity, pick) in enumerate(ops):
        ledger = ledgers[turn % 2]
        if release and held:
            ours, theirs = held.pop(pick % len(held))
            ledger.release(ours)  # type: ignore[arg-type]
            reference.release(theirs)  # type: ignore[arg-type]
            continue
        ours = ledger.acquire({"GPU": quantity})
        theirs = reference.acquire({"GPU": quantity})
        assert (ours is None) == (theirs is None)
        if ours is not None and theirs is not None:
            assert ours.devices == theirs.devices
            held.append((ours, theirs))
    assert sorted(g.token for g in ledgers[0].grants()) == sorted(g.token for g, _ in held)  # type: ignore[attr-defined]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
SHAPED = st.fixed_dictionaries(
    {
        "version": st.just(1),
        "boot": st.just(boot_id()),
        "node": st.none() | JSON,
        "next_ticket": JSON,
        "grants": st.lists(
            JSON
            | st.fixed_dictionaries(
                {
                    "grant": JSON
                    | st.fixed_dictionaries({"token": st.integers()}, optional={"devices": JSON}),
                    "holder": st.fixed_dictionaries({"pid": st.just(1), "start": st.just(0)}),
                    "since": st.integers(),
                }
            ),
            max_size=2,
        ),
        "queue": st.lists(JSON, max_size=2),
    }
)


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=JSON | SHAPED)
def test_any_file_content_reads_or_is_a_ledger_error(
    tmp_path: Path, h100: Node, data: object
) -> None:
    path = tmp_path / "ledger.json"
    path.write_text(json.dumps(data))
    try:
        Ledger(path, h100).grants()
    except LedgerError as error:
        assert str(path) in str(error)
