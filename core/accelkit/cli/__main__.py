"""``python -m accelkit.cli``."""

from accelkit.cli import script

script()
