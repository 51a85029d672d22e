"""The hooks a plugin may implement; each docstring is the hook's reference documentation.

Plugins mark implementations with ``@accelkit.hookimpl`` and never import pluggy themselves.
Only ``accelkit_register_managers`` is needed for a new accelerator; the others exist where
several plugins contribute at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Optional

import pluggy

if TYPE_CHECKING:
    from accelkit.manager import AcceleratorManager
    from accelkit.node._record import Node
    from accelkit.schedule._grant import Grant

__all__ = ["ENTRY_POINT_GROUP", "PROJECT", "hookimpl", "hookspec"]

PROJECT = "accelkit"
"""pluggy's project name: what ``hookimpl`` marks."""

ENTRY_POINT_GROUP = "accelkit"
"""The entry-point group that declares plugins: ``[project.entry-points.accelkit]``."""
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def accelkit_register_managers() -> Iterable[AcceleratorManager]:
    """Return the accelerator managers this plugin provides (usually one).

    Called once per process, on first use of discovery. Each manager's ``name`` is its family;
    two plugins claiming one family is an error unless one declares ``replaces``.
    """


@hookspec
def accelkit_node_labels(node: Node) -> Optional[Mapping[str, str]]:
    """Return extra labels for a detected node (e.g. a site's rack or a driver version).

    Keys are used as given; every implementation's labels are merged in pluggy's call order
    (the last registered plugin first; ``tryfirst``/``trylast`` honoured), and a key that an
    earlier source already set is kept from that source.
    """


@hookspec
def accelkit_worker_env(
    grant: Grant,
    env: Mapping[str, Optional[str]],
    managers: Mapping[str, AcceleratorManager],
) -> Optional[Mapping[str, Optional[str]]]:
    """Return variables to add to a worker's environment for ``grant`` (None: nothing).

    ``env`` is what the families' visibility rules produced; an implementation must not undo
    them, only add (e.g. advisory framework memory hints for fractional shares). A value of
    None asks for the variable to be unset. ``managers`` are the granted families' managers
    (by family), for what each family declares (``frameworks.memory_hints``); an
    implementation may leave the argument out of its signature.
    """
