"""Reading what GPU vendor libraries and tools say, for any GPU-like plugin.

Vendor tools disagree on spelling: a bus id is ``00000000:17:00.0`` (NVML) or ``0000:17:00.0``
(sysfs), a device id ``29857`` (KFD) or ``"0x74a1"`` (amd-smi), strings are ``bytes`` or ``str``
depending on a binding's release, and JSON field names and nesting move between releases. The
helpers here read all of those leniently and return None for what they cannot read, so a plugin
stays a data sheet; type labels come from a vendor's table of patterns. Memory sizes in text:
:func:`accelkit.textparse.parse_memory`; sysfs walkers: :mod:`accelkit.gpu_sysfs`.
"""

from __future__ import annotations

import contextlib
import itertools
import re
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Callable, Optional, TypeVar

from accelkit._shown import shown
from accelkit.detect._layers import import_library, normalise_bus_id
from accelkit.detect._sessions import Watch, step, watched
from accelkit.device import MAX_DEVICES
from accelkit.diagnostics import note
from accelkit.host import Host
from accelkit.host import _deadlines as deadlines

__all__ = [
    "decode",
    "device_count",
    "find_field",
    "json_records",
    "library_session",
    "normalise_bus_id",
    "parse_int",
    "sanitize_label",
    "type_label",
]

T = TypeVar("T")
_TRADEMARKS = r"(?i)\((?:R|TM|C)\)|[®™]"
_NOT_LABEL = r"[^A-Za-z0-9.]+"


@contextlib.contextmanager
def library_session(
    host: Host, name: str, init: str, shutdown: str, absent: Sequence[str] = ()
) -> Iterator[Any]:
    """A vendor management library imported and initialised for the block, then shut down.

    NVML (``nvmlInit``/``nvmlShutdown``) and amdsmi (``amdsmi_init``/``amdsmi_shut_down``) hold
    driver handles until shut down, also when reading a device fails half-way. Yields None (with a
    note) when the library is not installed, or when ``init`` raises an exception whose class,
    or a status its message names, is in ``absent`` (NVML's ``NVMLError_DriverNotLoaded``;
    amdsmi raises one class for every status, so ``AMDSMI_STATUS_DRIVER_NOT_LOADED``): a binding
    with no driver behind it is an absent stack, an ``info`` note. Any other ``init`` error
    propagates, so the detection layer reports it and the next layer answers.

    In a ``library`` layer of :func:`~accelkit.detect.detect_layers`, the import, ``init`` and
    every call of the block take the library budget (``ACCELKIT_LIBRARY_TIMEOUT``) in all: a
    call that blocks (a hung driver, in ``init`` or in any query after it) times the layer out,
    and the library is not used again until that call returns (``_sessions``). Elsewhere the
    import and ``init`` may each take the budget. Either way a ``shutdown`` that blocks is
    only noted, keeping what the block found.
    """
    watch = watched()  # a library layer's session: bounded as a whole (``_sessions``)
    if watch is not None:
        watch.name = name
    library = _bounded(
        watch, lambda: import_library(host, name), f"import {name}", ("import", name)
    )
    if library is None:
        yield None
        return
    if watch is not None:
        watch.library = library
    try:
        _bounded(watch, getattr(library, init), f"{name}.{init}()", (id(library), init))
    except Exception as exc:
        named = {cls.__name__ for cls in type(exc).__mro__}
        if not (named & set(absent) or any(status in str(exc) for status in absent)):
            raise
        note(f"{name}.{init}() found no vendor stack: {type(exc).__name__}: {exc}")
        yield None
        return
    if watch is not None:  # a call that hangs keeps the library from being initialised again
        watch.step = f"a {name} call after {name}.{init}()"
    try:
        yield library
    finally:
        if watch is not None:
            watch.deadline = None  # the shutdown has a budget of its own
        try:
            _bounded(
                None, getattr(library, shutdown), f"{name}.{shutdown}()", (id(library), shutdown)
            )
        except TimeoutError as exc:
            note(f"{exc}; what the library said is kept", "error")


def _bounded(watch: Optional[Watch], function: Callable[[], T], what: str, key: Hashable) -> T:
    """``function()`` within the library budget: as a step of the library layer's session
    (``watch``; :mod:`accelkit.detect._sessions`), else in a thread of its own
    (:func:`accelkit.host._deadlines.call_within`)."""
    if watch is not None:
        return step(watch, function, what, key)
    return deadlines.call_within(function, deadlines.limit(None, "library"), what, key)


def device_count(value: object, what: str) -> int:
    """A count of devices or cores a vendor reported, checked: a whole number from 0 to
    :data:`MAX_DEVICES`. Anything else (NVML's -1, a ``Chip Count`` of a billion, text) raises
    ``ValueError`` naming ``what``, so the detection layer fails, says why, and the next answers.
    """
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_DEVICES:
        raise ValueError(
            f"{what} is {shown(value)}, not a count from 0 to {MAX_DEVICES} "
            "(accelkit.detect.MAX_DEVICES)"
        )
    return value


def parse_int(value: object, base: int = 10) -> Optional[int]:
    """``29857``, ``"29857"`` or ``"0x74a1"`` as an int; None for ``"N/A"`` and other text.

    Text without a ``0x`` prefix is read in ``base``: 16 for values a tool prints as bare hex
    digits in some releases and with ``0x`` in others (amdsmi's ASIC serial).
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if not isinstance(value, str):
        return None
    text = value.strip()
    try:
        return int(text, 16 if text[:2].lower() == "0x" else base)
    except ValueError:
        return None


def decode(value: object) -> str:
    """Text from a C library binding, which gives ``bytes`` in some releases and ``str`` in others
    (NVML names and bus ids in older nvidia-ml-py)."""
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def json_records(data: Any) -> Optional[list[Mapping[str, Any]]]:
    """The per-device records of a tool's JSON: a top-level list, or the first list of objects
    under a top-level key (``{"device_list": [...]}``, ``{"gpu_data": [...]}``), a key naming
    devices first (newer tools add top-level lists of other things); None if none. At most
    :data:`MAX_DEVICES` records, with a note when there were more."""
    candidates = [data] if isinstance(data, list) else []
    if isinstance(data, Mapping):
        keyed = sorted(data.items(), key=lambda item: "device" not in str(item[0]).lower())
        candidates = [value for _, value in keyed if isinstance(value, list)]
    for candidate in candidates:
        mappings = (item for item in candidate if isinstance(item, Mapping))
        records = list(itertools.islice(mappings, MAX_DEVICES + 1))
        if len(records) > MAX_DEVICES:
            note(f"the JSON lists more than {MAX_DEVICES} devices; keeping the first", "error")
            return records[:MAX_DEVICES]
        if records or not candidate:
            return records
    return None


def find_field(record: Any, *names: str) -> Any:
    """The value of the first of ``names`` found in ``record`` or its nested objects.

    For tools whose field names and nesting move between releases (``vram_size_mb`` at the
    top, later ``vram.size``): list every spelling seen, best first. None when absent.
    """
    for name in names:
        found = _search(record, name)
        if found is not None:
            return found
    return None


def _search(record: Any, name: str) -> Any:
    if not isinstance(record, Mapping):
        return None
    if record.get(name) is not None:
        return record[name]
    return next((found for v in record.values() if (found := _search(v, name)) is not None), None)


def sanitize_label(
    text: Optional[str], drop: Iterable[str] = (), prefix: str = ""
) -> Optional[str]:
    """A resource-safe label from a model name: ``"Intel(R) Arc(TM) A770"`` -> ``"Intel-Arc-A770"``.

    Trademark marks and the words in ``drop`` (e.g. ``"NVIDIA"``) go, every other run of
    characters outside ``[A-Za-z0-9.]`` becomes one ``-``; ``prefix`` is added when missing.
    """
    dropped = set(drop)
    words = [w for w in re.sub(_TRADEMARKS, " ", text or "").split() if w not in dropped]
    label = re.sub(_NOT_LABEL, "-", " ".join(words)).strip("-.")
    if not label:
        return None
    if prefix and not label.lower().startswith(prefix.lower()):
        label = f"{prefix}-{label}"
    return label


def type_label(
    model: Optional[str],
    rules: Sequence[tuple[str, str]],
    drop: Iterable[str] = (),
    prefix: str = "",
) -> Optional[str]:
    """The normalised type label of ``model`` from a vendor's table of ``(regex, template)``.

    The first rule whose regex is found (case-insensitive) gives ``match.expand(template)``,
    sanitized, so ``(r"\\b(H100|A100)\\b", r"\\1")`` maps ``"NVIDIA H100 80GB HBM3"`` to ``"H100"``
    and ``(r"GPU (Max \\d+)", r"Intel-GPU-\\1")`` gives ``"Intel-GPU-Max-1550"``. An unknown model
    still gets a label: :func:`sanitize_label` of the whole name.
    """
    if not model:
        return None
    for pattern, template in rules:
        found = re.search(pattern, model, re.IGNORECASE)
        if found:
            return sanitize_label(found.expand(template))
    return sanitize_label(model, drop, prefix)
