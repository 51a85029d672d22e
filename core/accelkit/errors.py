"""The exceptions accelkit raises, in one place so callers can catch them without importing more."""

from __future__ import annotations

__all__ = [
    "AccelkitError",
    "ConfigurationError",
    "InvalidData",
    "InvalidRequest",
    "LedgerError",
    "PluginError",
    "PluginWarning",
    "ProbeError",
    "UnknownFamily",
    "Unsatisfiable",
    "WorkerCrashed",
]


class AccelkitError(Exception):
    """Base class of every error accelkit raises on purpose."""


class InvalidRequest(AccelkitError, ValueError):
    """A resource request, quantity or grant operation that is wrong as written.

    A ``ValueError`` so schedulers that already validate with ``except ValueError`` keep working.
    """


class Unsatisfiable(InvalidRequest):
    """A well-formed request that can never fit on this node, however much is released."""


class ConfigurationError(AccelkitError, ValueError):
    """The node's configuration contradicts itself (an override against a visibility variable)."""


class InvalidData(AccelkitError, ValueError):
    """A record accelkit reads back (node or grant JSON, a snapshot directory) that is malformed.

    A ``ValueError`` as before it had a class of its own; the message names the record, the bad
    value and what would be right.
    """


class PluginError(AccelkitError, RuntimeError):
    """A plugin that the user required failed to load, or two plugins claim one family."""


class PluginWarning(RuntimeWarning):
    """A plugin failed to load or a hook call failed; the plugin (or its answer) was skipped."""


class LedgerError(AccelkitError, RuntimeError):
    """The node's ledger cannot be used as it is: corrupt, written by another accelkit version,
    kept for another node, or in a place this process may not write. The message names the file
    and what to do; accelkit never resets a ledger by itself."""


class UnknownFamily(AccelkitError, KeyError):
    """``get_manager`` has no manager for the family; the message says which exist and why not.

    A ``KeyError`` because a lookup by family is a lookup by key, and callers that catch
    ``KeyError`` keep working.
    """

    def __str__(self) -> str:
        # KeyError quotes its argument; the message is a sentence, shown as written.
        return str(self.args[0]) if self.args else ""


class ProbeError(AccelkitError, RuntimeError):
    """A probe function raised, or its process died (``crashed``), in the probe process.

    Detection layers catch it and fall through to the family's next layer; ``crashed`` tells a
    library that killed its process from one that raised.
    """

    def __init__(self, message: str, *, crashed: bool = False) -> None:
        super().__init__(message)
        self.crashed = crashed


class WorkerCrashed(AccelkitError, RuntimeError):
    """A pool worker process ended while it ran a call (killed, crashed, or ``os._exit``)."""
