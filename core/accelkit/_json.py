"""One rule for every JSON record accelkit reads back (node, grant, device, family policy,
snapshot manifest): an object, a known schema version, no unknown keys, the required ones present.
Nothing is silently lost, and the message names the record and what would be right."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from accelkit._shown import shown
from accelkit.errors import InvalidData

__all__ = ["check_keys", "check_version"]


def check_keys(
    data: object, known: Iterable[str], where: str, *, required: Iterable[str] = ()
) -> Mapping[str, Any]:
    """``data`` as a mapping, or :class:`InvalidData`: not an object, unknown keys, missing keys."""
    names = list(known)
    if not isinstance(data, Mapping):
        raise InvalidData(
            f"{where} must be a JSON object with keys among {names}, not {shown(data)}"
        )
    unknown = sorted(str(k) for k in data if k not in names)
    if unknown:
        raise InvalidData(f"{where} has unknown keys {unknown}; known: {names}")
    missing = [k for k in required if k not in data]
    if missing:
        raise InvalidData(f"{where} lacks the keys {missing}")
    return data


def check_version(data: Mapping[str, Any], supported: int, where: str) -> None:
    """:class:`InvalidData` unless ``data["schema_version"]`` is the version this accelkit reads."""
    version = data.get("schema_version")
    if version != supported or isinstance(version, bool):
        raise InvalidData(
            f"{where} schema_version {version!r} is not supported; this accelkit reads {supported}"
        )
