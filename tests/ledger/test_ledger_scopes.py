"""The ledger is the physical node's: a process that sees some devices takes only those, a
process on a grant takes steps of it, and a ledger is always one absolute file."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

import pytest
from accelkit import (
    AcceleratorManager,
    Device,
    FakeHost,
    Host,
    LedgerError,
    Node,
    Registry,
    Unsatisfiable,
    detect_node,
    hookimpl,
    load_snapshot,
)
from accelkit.ledger._holder import Holder, boot_id
from accelkit.ledger._identity import fingerprint
from accelkit.ledger._ledger import Ledger
from accelkit.ledger._location import GRANT_VAR, LEDGER_VAR
from ledger_support import H100, ROOT

TPU = str(ROOT / "examples" / "nodes" / "tpu-v6e-8")
H100_ONE = str(ROOT / "examples" / "nodes" / "nvidia-h100-1gpu")


def seeing(path: Path, visible: str, **options: object) -> Ledger:
    """A ledger as a process with ``CUDA_VISIBLE_DEVICES=visible`` opens it on the H100 node."""
    host = load_snapshot(H100, env={"CUDA_VISIBLE_DEVICES": visible})
    return Ledger(path, host=host, **options)  # type: ignore[arg-type]


def test_a_restricted_process_meets_the_physical_node_and_takes_only_what_it_sees(
    ledger_path: Path,
) -> None:
    everything = Ledger(ledger_path, host=load_snapshot(H100))
    restricted = seeing(
        ledger_path,
        "GPU-00000000-0000-0000-0000-000000000005,GPU-00000000-0000-0000-0000-000000000004",
    )
    assert fingerprint(restricted.node) == fingerprint(everything.node)
    first = restricted.acquire({"GPU": 1})
    assert first is not None and first.ids == {"GPU": ["4"]}  # physical ids, lowest free
    second = restricted.acquire({"GPU": 1})
    assert second is not None and second.ids == {"GPU": ["5"]}  # both named by their UUIDs
    assert restricted.acquire({"GPU": 1}) is None  # six GPUs are free, none it sees
    with pytest.raises(Unsatisfiable, match=r"GPU=3 can never fit in the devices this process"):
        restricted.acquire({"GPU": 3}, wait=True)
    whole = everything.acquire({"GPU": 6})
    assert whole is not None and whole.ids == {"GPU": ["0", "1", "2", "3", "6", "7"]}
    # An operator's exclusion or override for one user narrows what it takes, not the node.
    narrowed = Ledger(ledger_path, host=load_snapshot(H100), overrides={"GPU": 2})
    assert fingerprint(narrowed.node) == fingerprint(everything.node)
    everything.release(whole)
    assert narrowed.acquire({"GPU": 2}) is not None and narrowed.acquire({"GPU": 1}) is None
    excluding = load_snapshot(H100, env={"ACCELKIT_EXCLUDE_DEVICES": "nvidia:2,nvidia:3"})
    without = Ledger(ledger_path, host=excluding)
    assert fingerprint(without.node) == fingerprint(everything.node)
    taken = without.acquire({"GPU": 1})
    assert taken is not None and taken.ids == {"GPU": ["6"]}  # 0-5 held or excluded


class BusIdCards(AcceleratorManager):
    """Four cards a visibility variable names by id or by PCI bus id, as Tenstorrent's does."""

    name = "buscard"
    resource_name = "CARD"
    api_version = 2
    visible_devices_env_var = "CARD_VISIBLE_DEVICES"

    def detect(self, host: Host) -> list[Device]:
        return [Device(str(n), pci_bus_id=f"0000:0{n + 3}:00.0") for n in range(4)]

    def matches(self, token: str, device: Device) -> bool:
        return token == device.pci_bus_id or super().matches(token, device)


@hookimpl
def accelkit_register_managers() -> list[AcceleratorManager]:
    return [BusIdCards()]


def test_a_process_naming_its_device_by_another_token_takes_exactly_that_device(
    ledger_path: Path,
) -> None:
    """Detection renames the card ``CARD_VISIBLE_DEVICES=0000:04:00.0`` names to that bus id; the
    ledger finds it on the machine as detection found it, by the family's ``matches``."""
    plugins = Registry([sys.modules[__name__]], autoload=False)
    everything = Ledger(ledger_path, host=FakeHost(), registry=plugins)
    by_bus = FakeHost(env={"CARD_VISIBLE_DEVICES": "0000:04:00.0"})
    restricted = Ledger(ledger_path, host=by_bus, registry=plugins)
    assert fingerprint(restricted.node) == fingerprint(everything.node)
    whole = everything.acquire({"CARD": 4})
    assert whole is not None
    assert restricted.acquire({"CARD": 1}) is None  # not now: the card it sees is held
    (seen,) = detect_node(by_bus, registry=plugins).devices
    assert seen.id == "0000:04:00.0"
    assert [h.grant.token for h, _named in restricted.holding([seen])] == [whole.token]
    everything.release(whole)
    first = everything.acquire({"CARD": 1})
    assert first is not None and first.ids == {"CARD": ["0"]}
    taken = restricted.acquire({"CARD": 1})
    assert taken is not None and taken.ids == {"CARD": ["1"]}  # the card at 0000:04:00.0
    assert restricted.env(taken, {})["CARD_VISIBLE_DEVICES"] == "1"
    assert restricted.acquire({"CARD": 1}) is None  # two cards are free, none it sees


def test_a_node_made_up_by_configuration_keeps_its_own_identity(ledger_path: Path) -> None:
    """Logical devices an override adds exist nowhere else: the ledger serves that node."""
    empty = load_snapshot(H100, env={"CUDA_VISIBLE_DEVICES": ""})
    made_up = Ledger(ledger_path, host=empty, overrides={"TPU": 4})
    assert made_up.acquire({"TPU": 2}) is not None
    assert made_up.node.resources["TPU"] == 4


def test_a_process_on_a_grant_takes_steps_of_it(
    ledger_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = Ledger(ledger_path, host=load_snapshot(H100))
    job = node.acquire({"GPU": 2})
    assert job is not None and job.ids == {"GPU": ["0", "1"]}
    env = node.env(job)
    assert env[GRANT_VAR] == f"{job.token}@{ledger_path}" and env["CUDA_VISIBLE_DEVICES"] == "0,1"
    monkeypatch.setenv(GRANT_VAR, env[GRANT_VAR])
    inside = Ledger(None, node.node)  # the grant's ledger is the default inside it
    assert inside.path == ledger_path and inside.enclosing == job.token
    halves = [inside.acquire({"GPU": 0.5}) for _ in range(3)]
    assert [h.ids if h else None for h in halves] == [
        {"GPU": ["0"]},
        {"GPU": ["0"]},
        {"GPU": ["1"]},
    ]
    assert inside.acquire({"GPU": 1}) is None  # GPU 1 has half left; the node has six free
    with pytest.raises(Unsatisfiable, match=rf"can never fit in grant {job.token} \(GPU 0,1\)"):
        inside.acquire({"GPU": 3})
    parents = {h.grant.token: h.parent for h in node.view().holdings}
    assert parents == {job.token: None, **{h.token: job.token for h in halves if h}}
    # The job gives its grant back while its steps run: they stay counted, at the node's level.
    node.release(job)
    assert {h.parent for h in node.view().holdings} == {None}
    monkeypatch.delenv(GRANT_VAR)
    assert node.acquire({"GPU": 7}) is None
    rest = node.acquire({"GPU": 6})
    assert rest is not None and rest.ids == {"GPU": ["2", "3", "4", "5", "6", "7"]}
    monkeypatch.setenv(GRANT_VAR, env[GRANT_VAR])
    with pytest.raises(LedgerError, match=rf"runs on grant {job.token} .* no longer holds"):
        Ledger(None, node.node).acquire({"GPU": 1})


@pytest.mark.parametrize(
    ("snapshot", "override", "job_ids"),
    [
        (TPU, 8, ["0", "1"]),  # a node without NVIDIA GPUs: eight logical ones, made up
        (H100, 4, ["0", "1"]),  # the operator lends four of the eight H100s
        (H100_ONE, 4, ["0", "1"]),  # one real H100 and three logical GPUs beside it
    ],
    ids=["logical", "narrowed", "partly-logical"],
)
def test_an_override_holds_for_the_steps_of_a_grant_too(
    ledger_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    snapshot: str,
    override: int,
    job_ids: list[str],
) -> None:
    """Inside a grant, the operator's override still says what the node has and the grant's
    variables which of it the step sees: the step is not refused for the override being larger
    than the grant (the process would have detected its node as both at once)."""
    operator = {"ACCELKIT_OVERRIDE_RESOURCES": json.dumps({"GPU": override})}
    node = Ledger(ledger_path, host=load_snapshot(snapshot, env=operator))
    job = node.acquire({"GPU": 2})
    assert job is not None and job.ids == {"GPU": job_ids}
    env = node.env(job, base_env={})
    monkeypatch.setenv(GRANT_VAR, env[GRANT_VAR])
    inside_env = {**operator, "CUDA_VISIBLE_DEVICES": env["CUDA_VISIBLE_DEVICES"]}
    inside = Ledger(ledger_path, host=load_snapshot(snapshot, env=inside_env))
    assert fingerprint(inside.node) == fingerprint(node.node)
    steps = [inside.acquire({"GPU": 1}) for _ in range(2)]
    assert [s.ids if s else None for s in steps] == [{"GPU": ["0"]}, {"GPU": ["1"]}]
    assert inside.acquire({"GPU": 1}) is None  # the grant is spent; the node has GPUs free
    monkeypatch.delenv(GRANT_VAR)
    # Outside any grant, the variable alone narrows what a process takes of the same node.
    seeing_one = Ledger(
        ledger_path, host=load_snapshot(snapshot, env={**inside_env, "CUDA_VISIBLE_DEVICES": "1"})
    )
    assert fingerprint(seeing_one.node) == fingerprint(node.node)
    assert seeing_one.acquire({"GPU": 1}) is None  # GPU 1 is held by a step


@pytest.mark.parametrize(
    ("snapshot", "visible", "override", "expected"),
    [
        (TPU, "2,3,5", 3, ["2", "3", "5"]),  # DESIGN's example: logical GPUs named by the variable
        (H100, "6,7", 2, ["6", "7"]),  # the override keeps the two GPUs the variable shows
    ],
    ids=["design-example", "override-within-variable"],
)
def test_an_override_within_what_a_variable_shows_narrows_as_detection_does(
    ledger_path: Path, snapshot: str, visible: str, override: int, expected: list[str]
) -> None:
    """Where the override and the variable agree, the process takes what it detects: the
    variable's devices, not the first ones of the node the override configures."""
    env = {
        "CUDA_VISIBLE_DEVICES": visible,
        "ACCELKIT_OVERRIDE_RESOURCES": json.dumps({"GPU": override}),
    }
    host = load_snapshot(snapshot, env=env)
    assert [d.id for d in detect_node(host).devices if d.family == "nvidia"] == expected
    taken = Ledger(ledger_path, host=host).acquire({"GPU": override})
    assert taken is not None and taken.ids == {"GPU": expected}


def test_a_step_never_waits_behind_the_node_s_queue(
    ledger_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request for the whole node may wait for the very grant a step is part of."""
    node = Ledger(ledger_path, host=load_snapshot(H100))
    job = node.acquire({"GPU": 1})
    assert job is not None
    other = Ledger(ledger_path, host=load_snapshot(H100))
    assert other.acquire({"GPU": 8}, wait=True, timeout=0.05) is None  # withdrawn
    waiter = other._decide({"GPU": 8}, None, Holder.current(), None, "GPU=8", True, None)
    assert waiter[1] is not None  # a ticket for the node, waiting for the job's GPU
    monkeypatch.setenv(GRANT_VAR, f"{job.token}@{ledger_path}")
    step = Ledger(None, node.node).acquire({"GPU": 1}, wait=True, timeout=5)
    assert step is not None and step.ids == job.ids


def test_a_waiter_that_sees_some_devices_holds_back_only_grants_of_those(
    ledger_path: Path,
) -> None:
    """A shell with ``CUDA_VISIBLE_DEVICES=0`` waiting for its busy GPU 0 stalled every request
    on the node, for devices it can never use. It holds back only grants of what it sees, and
    its ticket says which (``ps`` shows them beside the request)."""
    everything = Ledger(ledger_path, host=load_snapshot(H100))
    zero = everything.acquire({"GPU": 1})
    assert zero is not None and zero.ids == {"GPU": ["0"]}
    restricted = seeing(ledger_path, "0")
    _grant, ticket, _view = restricted._decide(
        {"GPU": 1}, None, Holder.current(), None, "GPU=1", True, None
    )
    assert ticket is not None  # waits for GPU 0
    (waiting,) = everything.view().waiting
    assert (waiting.wants, waiting.sees) == ("GPU=1", (("nvidia", "0"),))
    beside = everything.acquire({"GPU": 1})
    assert beside is not None and beside.ids == {"GPU": ["1"]}  # nothing the waiter could use
    everything.release(zero)
    around = everything.acquire({"GPU": 1})  # GPU 0 would be first, but it is the waiter's turn
    assert around is not None and around.ids == {"GPU": ["2"]}
    assert restricted.acquire({"GPU": 1}) is None  # a request that does not wait queues too
    served = restricted._decide({"GPU": 1}, None, Holder.current(), ticket, "GPU=1", True, None)
    assert served[0] is not None and served[0].ids == {"GPU": ["0"]}


def test_a_request_held_back_by_a_restricted_waiter_takes_other_devices(
    ledger_path: Path,
) -> None:
    """GPU 0 half held, a shell that sees only GPU 0 waiting for a whole GPU: best fit put every
    request for half a GPU on GPU 0, where the waiter held it back, so it waited with seven GPUs
    idle. It is placed again around the devices such waiters see, whatever the requester
    sees; a waiter that sees every device still holds back every grant."""
    everything = Ledger(ledger_path, host=load_snapshot(H100))
    half = everything.acquire({"GPU": 0.5})
    assert half is not None and half.ids == {"GPU": ["0"]}
    waiting = seeing(ledger_path, "0")._decide(
        {"GPU": 1}, None, Holder.current(), None, "GPU=1", True, None
    )
    assert waiting[1] is not None
    beside = everything.acquire({"GPU": 0.5})
    assert beside is not None and beside.ids == {"GPU": ["1"]}
    packed = everything.acquire({"GPU": 0.5})
    assert packed is not None and packed.ids == {"GPU": ["1"]}
    restricted = seeing(ledger_path, "0,2").acquire({"GPU": 0.5})
    assert restricted is not None and restricted.ids == {"GPU": ["2"]}
    assert seeing(ledger_path, "0").acquire({"GPU": 0.5}) is None  # behind the waiter, for GPU 0
    unrestricted = everything._decide({"GPU": 8}, None, Holder.current(), None, "GPU=8", True, None)
    assert unrestricted[1] is not None
    assert everything.acquire({"GPU": 1}) is None  # first come, first served


@pytest.mark.parametrize(
    ("value", "complaint"),
    [
        ("12", "is not <token>@<absolute ledger path>"),
        ("x@/a", "is not <token>"),
        ("3@/srv/ledgers/", "is not <token>@<absolute ledger path>"),
    ],
)
def test_a_malformed_grant_variable_is_a_clear_error(
    ledger_path: Path, monkeypatch: pytest.MonkeyPatch, value: str, complaint: str
) -> None:
    monkeypatch.setenv(GRANT_VAR, value)
    with pytest.raises(LedgerError, match=complaint):
        Ledger(ledger_path)


def test_a_grant_of_another_user_is_no_grant_to_take_steps_of(
    ledger_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ACCELKIT_GRANT`` is text any process may set: with another user's token (``ps --json``
    shows it) a process took a step of their grant, and with it the devices they hold. A grant
    root took is stepped by the users it runs (a node agent's ``runuser``), and root steps any."""
    alice, bob = 1000 + os.getuid(), 1001 + os.getuid()  # two users, neither root
    monkeypatch.setattr(os, "getuid", lambda: alice)
    owner = Ledger(ledger_path, host=load_snapshot(H100))
    theirs = owner.acquire({"GPU": 4})
    assert theirs is not None
    monkeypatch.setenv(GRANT_VAR, f"{theirs.token}@{ledger_path}")
    monkeypatch.setattr(os, "getuid", lambda: bob)
    with pytest.raises(LedgerError, match=rf"which uid {alice} took, not this user \(uid {bob}\)"):
        Ledger(None, owner.node).acquire({"GPU": 1})
    for stepping in (alice, 0):
        monkeypatch.setattr(os, "getuid", lambda uid=stepping: uid)
        step = Ledger(None, owner.node).acquire({"GPU": 1})
        assert step is not None and step.ids["GPU"][0] in theirs.ids["GPU"]
    monkeypatch.delenv(GRANT_VAR)
    monkeypatch.setattr(os, "getuid", lambda: 0)
    roots = owner.acquire({"GPU": 2})
    assert roots is not None
    monkeypatch.setenv(GRANT_VAR, f"{roots.token}@{ledger_path}")
    monkeypatch.setattr(os, "getuid", lambda: bob)
    step = Ledger(None, owner.node).acquire({"GPU": 1})
    assert step is not None and step.ids["GPU"][0] in roots.ids["GPU"]


def test_a_grant_of_another_ledger_takes_nothing_of_this_one(
    ledger_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(GRANT_VAR, f"7@{tmp_path / 'other.json'}")
    assert Ledger(ledger_path).enclosing is None


def test_a_relative_path_is_refused_with_the_absolute_one_to_give(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(LedgerError, match=r"'ledger.json' is a relative path.*e\.g\. /"):
        Ledger("ledger.json")
    monkeypatch.setenv(LEDGER_VAR, "group/ledger.json")
    with pytest.raises(LedgerError, match=rf"{LEDGER_VAR}='group/ledger.json' is a relative"):
        Ledger()


@pytest.mark.parametrize("under", ["", "a/b/"], ids=["parent", "ancestor"])
def test_a_path_under_a_file_says_so_not_that_a_directory_is_missing(
    tmp_path: Path, h100: Node, under: str
) -> None:
    """``--ledger /x/file.py/l.json`` said "its directory /x/file.py does not exist" (or, to
    ``ps``, "Not a directory"): it exists, as a file."""
    (tmp_path / "file.py").write_text("")
    path = f"{tmp_path}/file.py/{under}ledger.json"
    for use in ("view", "acquire"):
        with pytest.raises(LedgerError) as caught:
            ledger = Ledger(path, h100)
            ledger.view() if use == "view" else ledger.acquire({"GPU": 1})
        assert str(caught.value) == (
            f"the ledger path {path!r} lies under {tmp_path}/file.py, which is a file, not a "
            "directory: no ledger can be made there; give the path of a file in a directory"
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.py"]


@pytest.mark.parametrize("path", ["", " "])
def test_an_empty_path_is_said_to_be_empty(path: str) -> None:
    """``--ledger ''`` was called relative, with the working directory to give instead, which
    is then refused as a directory."""
    with pytest.raises(LedgerError) as caught:
        Ledger(path)
    assert str(caught.value) == (
        f"the ledger path {path!r} is empty: give the absolute path of the ledger's file, or "
        "none (no --ledger, path=None) for the default ledger"
    )


@pytest.mark.parametrize("slashes", ["/", "//"])
def test_a_file_path_with_a_trailing_slash_is_told_to_drop_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slashes: str
) -> None:
    """``--ledger /x/ledger.json/`` was said to name a directory, with ``/x/ledger.json/
    ledger.json`` to give instead: where no such directory is, the file was meant."""
    path = f"{tmp_path}/ledger.json{slashes}"
    with pytest.raises(LedgerError) as caught:
        Ledger(path)
    assert str(caught.value) == (
        f"the ledger path {path!r} ends with '/', which names a directory, and there is none at "
        f"{tmp_path}/ledger.json: the ledger is a file; give its path without the '/' "
        f"({tmp_path}/ledger.json)"
    )
    monkeypatch.setenv(LEDGER_VAR, path)
    with pytest.raises(LedgerError, match=rf"{LEDGER_VAR}='.*' ends with '/'.*without the '/'"):
        Ledger()
    assert sorted(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["", ".", ".."])
def test_a_path_that_names_a_directory_is_refused_with_a_file_to_give(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """The ledger and its lock are named from the ledger's file: ``/srv/ledgers/`` names none
    (its lock would be ``/srv/ledgers/.lock``), so nothing is made there."""
    directory = f"{tmp_path}/{name}"
    with pytest.raises(
        LedgerError, match=r"names a directory, not the ledger's file.*ledger\.json"
    ):
        Ledger(directory)
    monkeypatch.setenv(LEDGER_VAR, directory)
    with pytest.raises(LedgerError, match=rf"{LEDGER_VAR}='.*' names a directory"):
        Ledger()
    assert sorted(tmp_path.iterdir()) == []


def test_an_existing_directory_or_a_device_is_refused_before_anything_is_made(
    tmp_path: Path,
) -> None:
    """``--ledger /srv/ledgers`` (a directory, without its slash) made ``/srv/ledgers.lock`` and
    then failed with "Is a directory"; ``/dev/null`` read as a corrupt ledger, to be removed."""
    (tmp_path / "ledgers").mkdir()
    with pytest.raises(LedgerError, match=r"names a directory.*ledgers/ledger\.json"):
        Ledger(str(tmp_path / "ledgers"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ledgers"]
    with pytest.raises(LedgerError, match=r"'/dev/null' names no regular file"):
        Ledger("/dev/null")


def test_the_ledger_keeps_its_path_as_given_and_shows_it_as_a_path(ledger_path: Path) -> None:
    """``Ledger.path`` is a ``Path`` (built on request), and the processes of a grant are told the
    ledger by the path it was given."""
    ledger = Ledger(str(ledger_path), host=load_snapshot(H100))
    assert ledger.path == ledger_path and isinstance(ledger.path, Path)
    grant = ledger.acquire({"GPU": 1})
    assert grant is not None
    assert ledger.env(grant)[GRANT_VAR] == f"{grant.token}@{ledger_path}"
    assert ledger.view().path == ledger_path
    assert repr(ledger) == f"<Ledger {ledger_path}>"


def test_a_version_1_ledger_is_read_and_upgraded(ledger_path: Path) -> None:
    node = Ledger(ledger_path, host=load_snapshot(H100))
    grant = node.acquire({"GPU": 1})
    assert grant is not None
    data = json.loads(ledger_path.read_text())
    for record in data["grants"]:
        del record["user"], record["parent"], record["note"]
    ledger_path.write_text(json.dumps({**data, "version": 1, "boot": boot_id()}))
    [holding] = Ledger(ledger_path, node.node).view().holdings
    assert holding.grant == grant and holding.user is None
    assert Ledger(ledger_path, node.node).acquire({"GPU": 1}) is not None
    assert json.loads(ledger_path.read_text())["version"] == 4


def test_a_ledger_this_process_may_not_write_is_listed_as_it_is(
    ledger_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = Ledger(ledger_path, host=load_snapshot(H100))
    assert node.acquire({"GPU": 1}) is not None
    data = json.loads(ledger_path.read_text())
    gone = dict(data["grants"][0], holder={"pid": 2**22 + 1, "start": 1})
    gone["grant"] = dict(gone["grant"], token=5)
    ledger_path.write_text(json.dumps({**data, "grants": [*data["grants"], gone]}))
    before = ledger_path.read_text()
    monkeypatch.setattr(os, "access", lambda *args, **kwargs: False)
    assert [h.holder.pid for h in Ledger(ledger_path).view().holdings] == [os.getpid()]
    assert ledger_path.read_text() == before  # read only, the dead holder left in the file


def test_a_process_with_another_set_of_plugins_meets_the_same_ledger(ledger_path: Path) -> None:
    """Detection lists every registered family; one without devices says nothing of the node."""
    everything = Ledger(ledger_path, host=load_snapshot(H100))
    assert everything.acquire({"GPU": 1}) is not None
    fewer = Registry(autoload=False, env={"ACCELKIT_DISABLE_PLUGINS": "tpu"})
    other = Ledger(ledger_path, host=load_snapshot(H100), registry=fewer)
    assert "tpu" in everything.node.policies and "tpu" not in other.node.policies
    taken = other.acquire({"GPU": 1})
    assert taken is not None and taken.ids == {"GPU": ["1"]}


def test_another_node_with_the_same_summary_is_told_what_differs(ledger_path: Path) -> None:
    ledger = Ledger(ledger_path, host=load_snapshot(H100))
    assert ledger.acquire({"GPU": 1}) is not None
    data = json.loads(ledger_path.read_text())
    data["node"]["fingerprint"] = "00000000"
    ledger_path.write_text(json.dumps(data))
    with pytest.raises(LedgerError, match="the same resources, but a device's id, index, type"):
        Ledger(ledger_path, host=load_snapshot(H100)).acquire({"GPU": 1})


def test_an_override_of_plain_capacity_meets_the_physical_node(ledger_path: Path) -> None:
    plain = Ledger(ledger_path, host=load_snapshot(H100))
    assert plain.acquire({"GPU": 1}) is not None
    scratch = Ledger(ledger_path, host=load_snapshot(H100), overrides={"scratch_disk": 2})
    assert fingerprint(scratch.node) == fingerprint(plain.node)
    taken = scratch.acquire({"GPU": 1, "scratch_disk": 1})
    assert taken is not None and taken.ids == {"GPU": ["1"]}
    assert scratch.acquire({"scratch_disk": 1}) is not None
    assert scratch.acquire({"scratch_disk": 1}) is None  # its two are held
    after = plain.acquire({"GPU": 1})  # counts the GPUs, not the other user's scratch disk
    assert after is not None and after.ids == {"GPU": ["2"]}


def test_overrides_of_plain_capacity_that_differ_lock_no_user_out(ledger_path: Path) -> None:
    """One user's override gives 2 of ``scratch_disk``, another's 1: while the first held 2, the
    second could take nothing, not a GPU, and was told to remove the ledger (whose grants
    live). Held beyond its own capacity, the capacity is used up, and nothing else."""
    host = load_snapshot(H100)
    two = Ledger(ledger_path, host=host, overrides={"scratch_disk": 2})
    one = Ledger(ledger_path, host=host, overrides={"scratch_disk": 1})
    both = two.acquire({"GPU": 1, "scratch_disk": 2})
    assert both is not None and both.ids == {"GPU": ["0"]}
    gpu = one.acquire({"GPU": 1})
    assert gpu is not None and gpu.ids == {"GPU": ["1"]}
    assert one.acquire({"scratch_disk": 1}) is None  # its one is used up
    half = two.acquire({"scratch_disk": 0.5})  # nothing left of the first's two either
    assert half is None
    two.release(both)
    disk = one.acquire({"scratch_disk": 1})
    assert disk is not None
    assert two.acquire({"scratch_disk": 1}) is not None  # its second one
    assert one.acquire({"scratch_disk": 0.5}) is None  # both held: its one is used up again
    one.release(disk)
    assert one.acquire({"scratch_disk": 0.5}) is None  # the other's holds its one


def test_a_node_given_already_narrowed_meets_the_physical_node(ledger_path: Path) -> None:
    """``Ledger(node=detect_node())`` in a restricted shell, as a pool given its node does."""
    assert Ledger(ledger_path, host=load_snapshot(H100)).acquire({"GPU": 1}) is not None
    host = load_snapshot(H100, env={"CUDA_VISIBLE_DEVICES": "0,2,3"})
    given = Ledger(ledger_path, detect_node(host=host), host=host)
    assert fingerprint(given.node) == fingerprint(Ledger(ledger_path, host=host).node)
    taken = [given.acquire({"GPU": 1}) for _ in range(3)]
    assert [t.ids if t else None for t in taken] == [{"GPU": ["2"]}, {"GPU": ["3"]}, None]


def test_processes_that_may_open_different_gpus_never_share_a_ledger_node(
    ledger_path: Path, tmp_path: Path
) -> None:
    """Two device cgroups of one machine: one may not open NVML's GPU 0, the other GPU 3. Both
    number the GPUs they see 0, 1, 2 as CUDA does, and only the device files tell them apart: the
    second is told the ledger holds another node's grants instead of being granted NVML's GPU 1,
    which the first already holds as its "0"."""
    from accelkit import FakeHost
    from accelkit.testing.fakes import nvidia as fake
    from accelkit.testing.fakes.nvml_c import emulated_pynvml

    def denied(index: int) -> FakeHost:
        gpus = fake.fake_gpus(4)
        gpus[index] = dataclasses.replace(gpus[index], accessible=False)
        return FakeHost(root=tmp_path, modules={"pynvml": emulated_pynvml(gpus)})

    first, second = Ledger(ledger_path, host=denied(0)), Ledger(ledger_path, host=denied(3))
    assert [d.id for d in first.node.devices] == [d.id for d in second.node.devices]
    assert fingerprint(first.node) != fingerprint(second.node)
    held = first.acquire({"GPU": 1})
    assert held is not None and held.ids == {"GPU": ["0"]}
    with pytest.raises(LedgerError, match="holds grants on another node"):
        second.acquire({"GPU": 2})
