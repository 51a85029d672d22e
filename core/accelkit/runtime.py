"""Inside a worker: which devices did my scheduler let me see?"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Optional

from . import registry

__all__ = ["visible_ids"]


def visible_ids(env: Optional[Mapping[str, str]] = None) -> dict[str, Optional[list[str]]]:
    """Visible device ids by family, as each family's runtime would read ``env``.

    ``env`` defaults to ``os.environ``. ``{"nvidia": ["0"], "tpu": None}``: ids are strings in
    the family's own id space (what the grant wrote); None means the variable is unset (every
    device visible), ``[]`` that nothing is (``""`` or ``NoDevFiles``). Reading tolerates
    whitespace around ids.
    """
    source: Mapping[str, str] = os.environ if env is None else env
    visible: dict[str, Optional[list[str]]] = {}
    for manager in registry.managers():
        ids = manager.read_visible(source)
        visible[manager.name] = None if ids is None else [str(i) for i in ids]
    return visible
