"""Kubernetes label syntax, which Ray's node labels and NFD feature files both follow.

A label value (and the name part of a key) is at most 63 characters: alphanumerics with ``-``,
``_`` and ``.`` between them. Node labels come from plugins and may hold anything (a model
"Intel(R) Max"), so exports rewrite them into that syntax rather than emit a line the consumer
rejects: other characters become ``-``, and the ends are trimmed to alphanumerics.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["label_name", "label_value", "relabel"]

MAX_NAME = 63
_OUTSIDE = r"[^A-Za-z0-9_.\-]"
_EDGES = r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$"


def label_value(text: str) -> str:
    """``text`` in label-value syntax (possibly empty, which a label value may be)."""
    return re.sub(_EDGES, "", re.sub(_OUTSIDE, "-", text)[:MAX_NAME])


def label_name(key: str) -> str:
    """The name part of a label key (after its last ``/``) in label syntax; ``ValueError`` when
    nothing of it is left."""
    name = label_value(key.rpartition("/")[2])
    if not name:
        raise ValueError(f"label key {key!r} has no name that Kubernetes label syntax allows")
    return name


def relabel(labels: Mapping[str, str], prefix: str) -> dict[str, str]:
    """``labels`` with each key's name put under ``prefix`` (e.g. ``"accelkit/"``) and each value
    in label syntax; two keys that end up the same are an error naming both."""
    result: dict[str, str] = {}
    origin: dict[str, str] = {}
    for key, value in labels.items():
        new = prefix + label_name(key)
        if new in result:
            raise ValueError(
                f"labels {origin[new]!r} and {key!r} would both be exported as {new!r}"
            )
        result[new] = label_value(value)
        origin[new] = key
    return result
