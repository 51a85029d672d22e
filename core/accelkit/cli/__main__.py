"""``python -m accelkit.cli``."""

import sys

from accelkit.cli import main

sys.exit(main())
