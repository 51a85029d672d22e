"""How accelkit reads its own switches from the environment: one rule for each kind of variable.

``ACCELKIT_DISABLE_PLUGIN_AUTOLOAD``, ``ACCELKIT_TRACE_PLUGINS``, ``ACCELKIT_NOSET_<FAMILY>`` and
the others are flags. Unset and empty mean off; ``1``, ``true``, ``yes`` and ``on`` mean on;
``0``, ``false``, ``no`` and ``off`` mean off (any case, spaces ignored). Anything else is a
:class:`~accelkit.ConfigurationError` naming the variable: a typo must not silently flip a switch.

Time budgets are seconds (:class:`Budgets`): a positive number; unset or empty is the default.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import NamedTuple

from accelkit.errors import ConfigurationError

__all__ = [
    "COMMAND_TIMEOUT_VAR",
    "DETECT_TIMEOUT_VAR",
    "FALSE",
    "LIBRARY_TIMEOUT_VAR",
    "PROBE_TIMEOUT_VAR",
    "TRUE",
    "Budgets",
    "flag",
    "names",
    "seconds",
]

COMMAND_TIMEOUT_VAR = "ACCELKIT_COMMAND_TIMEOUT"
PROBE_TIMEOUT_VAR = "ACCELKIT_PROBE_TIMEOUT"
LIBRARY_TIMEOUT_VAR = "ACCELKIT_LIBRARY_TIMEOUT"
DETECT_TIMEOUT_VAR = "ACCELKIT_DETECT_TIMEOUT"

TRUE = ("1", "true", "yes", "on")
FALSE = ("", "0", "false", "no", "off")


def flag(env: Mapping[str, str], name: str) -> bool:
    """Whether the on/off variable ``name`` is on in ``env``."""
    value = env.get(name, "").strip().lower()
    if value in TRUE:
        return True
    if value in FALSE:
        return False
    raise ConfigurationError(
        f"{name}={env[name]!r} is not a switch: write 1, true, yes or on to turn it on, or "
        "0, false, no, off or nothing to turn it off"
    )


def names(env: Mapping[str, str], name: str) -> tuple[str, ...]:
    """The comma-separated names in variable ``name``: ``a, b`` -> ``("a", "b")``."""
    return tuple(part.strip() for part in env.get(name, "").split(",") if part.strip())


def seconds(env: Mapping[str, str], name: str, default: float) -> float:
    """The positive number of seconds in variable ``name``; ``default`` when unset or empty."""
    text = env.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise ConfigurationError(
            f"{name}={env[name]!r} is not a time budget: write a positive number of seconds, "
            f"such as {default:g}, or nothing for the default"
        )
    return value


class Budgets(NamedTuple):
    """How long each thing detection waits for may take, in seconds, before it is cut and
    reported; the other families still answer.

    ``command``: a vendor command (``ACCELKIT_COMMAND_TIMEOUT``, default 10; ``nvidia-smi`` can
    hang). ``probe``: a library probe process (``ACCELKIT_PROBE_TIMEOUT``, default 20; SYCL and
    ACL initialisation is slow, not endless). ``library``: a detection layer's work in an
    in-process vendor library such as NVML or amdsmi, its import, initialisation and queries in
    all (``ACCELKIT_LIBRARY_TIMEOUT``, default 10).
    ``detection``: the whole of one node detection, every family at once
    (``ACCELKIT_DETECT_TIMEOUT``, default 30): a family that has not answered by then is left out,
    however many hang, and every command and probe process started for it is killed before
    detection returns (a hung in-process call cannot be: its thread is left, and not started
    again while it runs). (A named tuple: a dataclass costs ``import accelkit.host._processes``
    a fifth of a millisecond more.)
    """

    command: float = 10.0
    probe: float = 20.0
    library: float = 10.0
    detection: float = 30.0

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Budgets:
        """The budgets the ``ACCELKIT_*_TIMEOUT`` variables in ``env`` set; bad values raise."""
        default = cls()
        return cls(
            command=seconds(env, COMMAND_TIMEOUT_VAR, default.command),
            probe=seconds(env, PROBE_TIMEOUT_VAR, default.probe),
            library=seconds(env, LIBRARY_TIMEOUT_VAR, default.library),
            detection=seconds(env, DETECT_TIMEOUT_VAR, default.detection),
        )
