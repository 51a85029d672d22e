"""``python -m accelkit``: the ``accelkit`` command, where no script is on ``PATH`` (a venv made
with ``--system-site-packages`` over an install that has one, a zipapp, an embedded Python)."""

from accelkit.cli import script

if __name__ == "__main__":  # imported by a module walker or a doctest run, it does nothing
    script()
