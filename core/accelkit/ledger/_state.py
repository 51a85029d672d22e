"""The ledger's content: its grants, its waiting requests, and their JSON layout.

Layout (``"version": 4``)::

    {"version": 4, "boot": "<boot id>", "node": {"fingerprint": "...", "summary": "GPU=8"},
     "next_ticket": 3,
     "grants": [{"grant": <Grant.to_dict()>, "holder": {"pid": 41, "start": 9912}, "since": T,
                 "user": 1000, "parent": null, "note": null}],
     "queue": [{"ticket": 2, "holder": {...}, "wants": "GPU=1", "since": T, "user": 1000,
                "parent": null, "sees": [["nvidia", "0"]]}]}

``user`` is the uid that took the grant (``accelkit ps`` shows it: in a group's ledger the pid
alone does not say whose work it is); ``parent`` is the token of the grant a step was taken
from (null at the node's level); ``note`` says what the holder is, for ``accelkit ps``, when its
command line would not. A device in a grant may carry its ``minor`` (version 3: an accelkit
reading version 2 refuses that key as corrupt, so the layout names the newer version instead).
A ticket's ``sees`` (version 4) lists the devices its process could take, when it sees only some
(null: every one): a waiter lets grants of other devices pass (:mod:`accelkit.ledger._queue`).
Version 1, 2 and 3 files are read as they are, so a node's accelkit can be upgraded while grants
are live; an older accelkit refuses a newer version with a message naming it rather than
calling the file corrupt.
"""

from __future__ import annotations

from math import isfinite
from typing import Any, Optional

from accelkit._json import check_keys
from accelkit.ledger._holder import Holder

__all__ = [
    "READS",
    "VERSION",
    "LedgerState",
    "Record",
    "Ticket",
    "never_a_ledger",
    "never_ledger_text",
    "state_from_dict",
]

VERSION = 4
"""The layout this accelkit writes."""
READS = (1, 2, 3, VERSION)
"""The layouts it reads (an older file as it is); any other is refused with a message."""

_KEYS = ("version", "boot", "node", "next_ticket", "grants", "queue")
_RECORD_REQUIRED = ("grant", "holder", "since")
_RECORD_KEYS = (*_RECORD_REQUIRED, "user", "parent", "note")
_TICKET_REQUIRED = ("ticket", "holder", "wants", "since")
_TICKET_KEYS = (*_TICKET_REQUIRED, "user", "parent", "sees")


class Record:
    """A live grant: its ``Grant.to_dict()``, its holder, since when (epoch seconds), the uid
    that took it (None in version 1 files), the grant it is a step of, and a note for people."""

    __slots__ = ("grant", "holder", "note", "parent", "since", "user")

    def __init__(
        self,
        grant: dict[str, Any],
        holder: Holder,
        since: float,
        user: Optional[int] = None,
        parent: Optional[int] = None,
        note: Optional[str] = None,
    ) -> None:
        self.grant = grant
        self.holder = holder
        self.since = since
        self.user = user
        self.parent = parent
        self.note = note

    @property
    def token(self) -> int:
        token: int = self.grant["token"]
        return token

    def to_dict(self) -> dict[str, Any]:
        return {
            "grant": self.grant,
            "holder": self.holder.to_dict(),
            "since": self.since,
            "user": self.user,
            "parent": self.parent,
            "note": self.note,
        }


class Ticket:
    """A request waiting its turn: arrival number, holder, what it wants (text), since when, the
    uid that asked, the grant whose devices it waits for (None: the node's), and the devices it
    could take there when it sees only some of them (None: every one)."""

    __slots__ = ("holder", "parent", "sees", "since", "ticket", "user", "wants")

    def __init__(
        self,
        ticket: int,
        holder: Holder,
        wants: str,
        since: float,
        user: Optional[int] = None,
        parent: Optional[int] = None,
        sees: Optional[frozenset[tuple[str, str]]] = None,
    ) -> None:
        self.ticket = ticket
        self.holder = holder
        self.wants = wants
        self.since = since
        self.user = user
        self.parent = parent
        self.sees = sees

    def to_dict(self) -> dict[str, Any]:
        return {
            "ticket": self.ticket,
            "holder": self.holder.to_dict(),
            "wants": self.wants,
            "since": self.since,
            "user": self.user,
            "parent": self.parent,
            "sees": None if self.sees is None else [list(key) for key in sorted(self.sees)],
        }


class LedgerState:
    """The ledger's content while the lock is held; ``changed`` makes the writer save it."""

    __slots__ = ("boot", "changed", "grants", "next_ticket", "node", "queue")

    def __init__(
        self, boot: str, node: Optional[dict[str, str]] = None, next_ticket: int = 1
    ) -> None:
        self.boot = boot
        self.node = node
        self.next_ticket = next_ticket
        self.grants: list[Record] = []
        self.queue: list[Ticket] = []
        self.changed = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": VERSION,
            "boot": self.boot,
            "node": self.node,
            "next_ticket": self.next_ticket,
            "grants": [r.to_dict() for r in self.grants],
            "queue": [t.to_dict() for t in self.queue],
        }


def never_a_ledger(data: object) -> Optional[str]:
    """What the JSON ``data`` of a file is, when no accelkit ever wrote it as a ledger; None
    when it is a ledger, or may be a damaged one. Every layout is an object with the keys of
    :data:`_KEYS`: JSON that is no object, or an object with none of them but ``version`` (a
    ``package.json`` has one), was never a ledger. Naming it as the ledger is a mistake of the
    path, and its owner's file is no corrupt ledger to remove."""
    if not isinstance(data, dict):
        return f"its JSON is {_JSON_TYPES.get(type(data), 'a value')}, not an object"
    if any(key in data for key in _KEYS[1:]):
        return None
    return f"a JSON object with none of its keys ({', '.join(_KEYS[1:])})"


def never_ledger_text(raw: bytes) -> bool:
    """Whether bytes that are not JSON were never a ledger: every ledger is written beginning
    with ``{``. An empty file, one of NUL bytes, and a ledger's beginning cut short are what a
    crash or a full disk may leave of a ledger: those may be damaged ledgers."""
    text = raw.strip().strip(b"\0")
    return bool(text) and not text.startswith(b"{")


_JSON_TYPES = {
    list: "an array",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "true or false",
    type(None): "null",
}


def state_from_dict(data: Any) -> LedgerState:
    """The state a ledger file holds, read from its JSON (whose version is one of
    :data:`READS`); ``ValueError`` saying what does not read as the layout."""
    data = check_keys(data, _KEYS, "the ledger", required=_KEYS)
    boot = data["boot"]
    if not isinstance(boot, str):  # read as another boot, it would drop every live grant
        raise ValueError(f"its boot id is {boot!r:.80}, not text")
    node = data["node"]
    if node is not None and not (
        isinstance(node, dict)
        and sorted(node) == ["fingerprint", "summary"]
        and all(isinstance(v, str) for v in node.values())
    ):
        raise ValueError(f"its node is {{'fingerprint': ..., 'summary': ...}}, not {node!r}")
    next_ticket = data["next_ticket"]
    if not isinstance(next_ticket, int) or isinstance(next_ticket, bool):
        raise ValueError(f"next_ticket is {next_ticket!r}, not a whole number")
    state = LedgerState(boot=boot, node=node, next_ticket=next_ticket)
    for entry in _list(data["grants"], "grants"):
        entry = check_keys(entry, _RECORD_KEYS, "a ledger grant", required=_RECORD_REQUIRED)
        grant = entry["grant"]
        if not isinstance(grant, dict) or not _whole(grant.get("token")):
            raise ValueError(f"a recorded grant is {entry['grant']!r:.80}")
        note = entry.get("note")
        if note is not None and not isinstance(note, str):
            raise ValueError(f"a grant's note is {note!r:.80}, not text")
        state.grants.append(
            Record(
                entry["grant"],
                Holder.from_dict(entry["holder"]),
                _time(entry["since"]),
                user=_optional_whole(entry.get("user"), "a grant's user"),
                parent=_optional_whole(entry.get("parent"), "a grant's parent"),
                note=note,
            )
        )
    for entry in _list(data["queue"], "queue"):
        entry = check_keys(entry, _TICKET_KEYS, "a ledger ticket", required=_TICKET_REQUIRED)
        number = entry["ticket"]
        if not _whole(number):
            raise ValueError(f"a ticket number is {number!r}")
        state.queue.append(
            Ticket(
                number,
                Holder.from_dict(entry["holder"]),
                str(entry["wants"]),
                _time(entry["since"]),
                user=_optional_whole(entry.get("user"), "a ticket's user"),
                parent=_optional_whole(entry.get("parent"), "a ticket's parent"),
                sees=_device_keys(entry.get("sees")),
            )
        )
    _check_once([r.token for r in state.grants], "grant token")
    _check_once([t.ticket for t in state.queue], "ticket number")
    _check_steps(state.grants)
    return state


def _check_steps(grants: list[Record]) -> None:
    """Every step is a step of a recorded grant, and none is, through its parents, a step of
    itself. Devices are counted at the grant a step belongs to, so a step of no recorded grant
    would count nowhere and its devices would be handed out again; removing a grant makes its
    steps steps of the grant above it (``drop``), so no ledger accelkit wrote has such a step."""
    above = {record.token: record.parent for record in grants}
    for record in grants:
        passed = {record.token}
        parent = record.parent
        while parent is not None:
            if parent in passed:
                raise ValueError(f"grant {record.token} is a step of itself, through its parents")
            if parent not in above:
                raise ValueError(
                    f"grant {record.token} is a step of grant {parent}, which the ledger does "
                    "not hold"
                )
            passed.add(parent)
            parent = above[parent]


def _list(value: object, key: str) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError(f"{key} is {value!r:.80}, not a list")
    return value


def _check_once(numbers: list[int], what: str) -> None:
    """Each grant and ticket is recorded once: a second record of one would count its devices
    twice, or release them while the first still holds them."""
    seen: set[int] = set()
    for number in numbers:
        if number in seen:
            raise ValueError(f"{what} {number} is recorded twice")
        seen.add(number)


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _optional_whole(value: object, what: str) -> Optional[int]:
    """A uid or a grant token, or None (absent in version 1 files, null at the node's level)."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise ValueError(f"{what} is {value!r:.80}, not a whole number")


def _time(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not isfinite(value):
        raise ValueError(f"a time is {value!r:.80}, not a finite number")
    return float(value)


def _device_keys(value: object) -> Optional[frozenset[tuple[str, str]]]:
    """A ticket's ``sees``: null, or a list of ``[family, id]`` pairs."""
    if value is None:
        return None
    pairs = _list(value, "a ticket's devices")
    if not all(
        isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair)
        for pair in pairs
    ):
        raise ValueError(f"a ticket's devices are [family, id] pairs, not {value!r:.80}")
    return frozenset((family, device) for family, device in pairs)
