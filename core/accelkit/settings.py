"""How accelkit reads its own switches from the environment: one rule for every on/off variable.

``ACCELKIT_DISABLE_PLUGIN_AUTOLOAD``, ``ACCELKIT_TRACE_PLUGINS``, ``ACCELKIT_NOSET_<FAMILY>`` and
the others are flags. Unset and empty mean off; ``1``, ``true``, ``yes`` and ``on`` mean on;
``0``, ``false``, ``no`` and ``off`` mean off (any case, spaces ignored). Anything else is a
:class:`~accelkit.ConfigurationError` naming the variable: a typo must not silently flip a switch.
"""

from __future__ import annotations

from collections.abc import Mapping

from .errors import ConfigurationError

__all__ = ["FALSE", "TRUE", "flag", "names"]

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
