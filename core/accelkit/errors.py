"""The exceptions accelkit raises, in one place so callers can catch them without importing more."""

from __future__ import annotations

__all__ = [
    "AccelkitError",
    "ConfigurationError",
    "InvalidRequest",
    "LedgerError",
    "PluginError",
    "PluginWarning",
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


class PluginError(AccelkitError, RuntimeError):
    """A plugin that the user required failed to load, or two plugins claim one family."""


class PluginWarning(RuntimeWarning):
    """A plugin failed to load or a hook call failed; the plugin (or its answer) was skipped."""


class LedgerError(AccelkitError, RuntimeError):
    """The node's ledger cannot be used as it is: corrupt, written by another accelkit version,
    kept for another node, or in a place this process may not write. The message names the file
    and what to do; accelkit never resets a ledger by itself."""


class WorkerCrashed(AccelkitError, RuntimeError):
    """A pool worker process ended while it ran a call (killed, crashed, or ``os._exit``)."""
