"""The node's ledger: grants shared between processes through one locked file."""

from __future__ import annotations

from accelkit._lazy import lazy_exports

TYPE_CHECKING = False

_LAZY = {
    "Holding": "_views",
    "Ledger": "_ledger",
    "LedgerView": "_views",
    "Waiting": "_views",
    "GRANT_VAR": "_file",
    "LEDGER_VAR": "_file",
    "default_path": "_file",
}

__all__ = list(_LAZY)

if TYPE_CHECKING:
    from accelkit.ledger._ledger import Ledger as Ledger
    from accelkit.ledger._location import GRANT_VAR as GRANT_VAR
    from accelkit.ledger._location import LEDGER_VAR as LEDGER_VAR
    from accelkit.ledger._location import default_path as default_path
    from accelkit.ledger._views import Holding as Holding
    from accelkit.ledger._views import LedgerView as LedgerView
    from accelkit.ledger._views import Waiting as Waiting

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
