"""Inside a worker: which devices did my scheduler let me see?"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Optional

from .errors import PluginWarning

if TYPE_CHECKING:
    from .registry import Registry

__all__ = ["visible_ids"]


def visible_ids(
    env: Optional[Mapping[str, str]] = None, registry: Optional[Registry] = None
) -> dict[str, Optional[list[str]]]:
    """Visible device ids by family, as each family's runtime would read ``env``.

    ``env`` defaults to ``os.environ``. ``{"nvidia": ["0"], "tpu": None}``: ids are strings in
    the family's own id space (what the grant wrote); None means the variable is unset (every
    device visible), ``[]`` that nothing is (``""`` or ``NoDevFiles``). Reading tolerates
    whitespace around ids. A value a family cannot read (``NEURON_RT_VISIBLE_CORES=x``) counts
    as nothing visible, with a warning, as it does in :func:`~accelkit.detect_node`: one bad
    variable never hides the answer for the other families. The families are ``registry``'s
    (None: the default one).
    """
    from .registry import resolve

    source: Mapping[str, str] = os.environ if env is None else env
    visible: dict[str, Optional[list[str]]] = {}
    for manager in resolve(registry).managers():
        try:
            ids = manager.read_visible(source)
        except Exception as error:  # a plugin's reader must not break every worker's call
            warnings.warn(
                f"{manager.name}: cannot read its visibility variables ({error}); treating it "
                "as nothing visible",
                PluginWarning,
                stacklevel=2,
            )
            ids = []
        visible[manager.name] = None if ids is None else [str(i) for i in ids]
    return visible
