"""The session rules shared by the fake vendor management libraries (NVML, amdsmi)."""

from __future__ import annotations

from typing import Callable


class LibrarySession:
    """Whether a fake library is initialised, and how often it was opened and closed.

    Real management libraries refuse every call before their init function and hold driver
    handles until their shutdown function; the fakes keep both rules so detection code that
    forgets either fails its tests. ``calls`` counts the two functions by their real names.
    """

    def __init__(self, init: str, shutdown: str, not_open: Callable[[], Exception]) -> None:
        self.calls = {init: 0, shutdown: 0}
        self._names = (init, shutdown)
        self._not_open = not_open
        self.open = False

    def require(self) -> None:
        """Raise the library's own "not initialised" error unless a session is open."""
        if not self.open:
            raise self._not_open()

    def init(self, *_flags: object) -> None:
        self.calls[self._names[0]] += 1
        self.open = True

    def shutdown(self) -> None:
        self.require()
        self.calls[self._names[1]] += 1
        self.open = False
