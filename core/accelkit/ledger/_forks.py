"""The ledger's objects in a forked child: renewed before anything else runs there.

A process that forks (``os.fork``, multiprocessing's default start method on Linux) while another
of its threads decides in the ledger gives the child that thread's locks held, and no thread to
release them: the child's first use of the ledger would wait forever. The objects that hold such
locks, or state a thread may have been changing, register here, and the child renews them at
the fork (as ``concurrent.futures`` and ``logging`` renew their locks).
"""

from __future__ import annotations

import os
import weakref
from typing import Protocol

__all__ = ["renew_after_fork"]


class _Renewable(Protocol):
    def after_fork(self) -> None:
        """Make this object usable in a forked child."""


_renewable: weakref.WeakSet[_Renewable] = weakref.WeakSet()


def renew_after_fork(renewable: _Renewable) -> None:
    """Have ``renewable.after_fork()`` run in every child this process forks from now on, for as
    long as the object lives."""
    _renewable.add(renewable)


def _renew() -> None:
    for renewable in list(_renewable):
        renewable.after_fork()


if hasattr(os, "register_at_fork"):  # not on Windows, which has no fork
    os.register_at_fork(after_in_child=_renew)
