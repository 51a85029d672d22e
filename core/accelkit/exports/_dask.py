"""The ``dask worker --resources`` option for what accelkit found on this machine."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from accelkit.exports._ray import number

if TYPE_CHECKING:
    from accelkit.node._record import Node

__all__ = ["to_dask"]

_UNSAFE = r"[\s=,\"$`\\]"
"""What breaks ``NAME=VALUE`` pairs (dask splits on spaces, commas and ``=``) or the quoting."""


def to_dask(node: Node) -> str:
    """``--resources "GPU=8 accelerator_type:H100=1"``: shell text, for ``dask worker``.

    Dask applies ``--resources`` to each worker process, so this describes a node served by one
    worker; ``accelkit dask-worker`` starts one worker per device with its own share instead.
    """
    bad = [name for name in node.resources if re.search(_UNSAFE, name)]
    if bad:
        raise ValueError(f"resource names dask cannot read as NAME=VALUE pairs: {bad}")
    pairs = " ".join(f"{name}={number(value)}" for name, value in node.resources.items())
    return f'--resources "{pairs}"'
