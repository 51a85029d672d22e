"""``python -m accelkit.cli``."""

import sys

from . import main

sys.exit(main())
