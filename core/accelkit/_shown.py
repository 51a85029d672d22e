"""How error messages show a value a user or a machine supplied: short, and never failing.

``repr`` is the right spelling (it escapes newlines and control characters), but it can be huge
(40 KB of garbage) and, for an integer of more than 4300 digits, raises ``ValueError`` on
Python >= 3.11. Every message that echoes input goes through :func:`shown`.
"""

from __future__ import annotations

__all__ = ["shown"]


def shown(value: object, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters; a huge integer is described, not written."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 256:
        return f"<an integer of {value.bit_length()} bits>"
    try:
        text = repr(value)
    except Exception as exc:  # a value whose repr breaks is still shown as something
        return f"<{type(value).__name__} whose repr failed: {type(exc).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."
