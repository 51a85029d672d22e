"""What accelkit catches where it calls plugin code: anything a plugin can raise, ``sys.exit()``
included, but never the user's Ctrl-C.

A plugin that calls ``sys.exit()`` at import or in ``detect()`` would otherwise end the scheduler
that loaded it; caught, it is reported like any other plugin fault and the other plugins answer.
"""

from __future__ import annotations

__all__ = ["PLUGIN_FAULTS"]

PLUGIN_FAULTS: tuple[type[BaseException], ...] = (Exception, SystemExit)
"""``except PLUGIN_FAULTS`` around every call into plugin code (``KeyboardInterrupt`` and
``GeneratorExit`` pass through)."""
