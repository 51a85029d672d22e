"""The session rules shared by the fake vendor management libraries (NVML, amdsmi)."""

from __future__ import annotations

from typing import Callable


class LibrarySession:
    """Whether a fake library is initialised, and how often it was opened and closed.

    Real management libraries refuse every call before their init function and hold driver
    handles until their shutdown function; the fakes keep both rules so detection code that
    forgets either fails its tests. ``calls`` counts the two functions by their real names.
    Closing without a session is the "not initialised" error unless ``closing_idle_succeeds``:
    libamd_smi's ``amdsmi_shut_down`` then answers success (``amd_smi.cc``: ``if
    (!initialized_lib) return AMDSMI_STATUS_SUCCESS;``).
    """

    def __init__(
        self,
        init: str,
        shutdown: str,
        not_open: Callable[[], Exception],
        *,
        closing_idle_succeeds: bool = False,
    ) -> None:
        self.calls = {init: 0, shutdown: 0}
        self._names = (init, shutdown)
        self._not_open = not_open
        self._closing_idle_succeeds = closing_idle_succeeds
        self.open = False

    def require(self) -> None:
        """Raise the library's own "not initialised" error unless a session is open."""
        if not self.open:
            raise self._not_open()

    def init(self, *_flags: object) -> None:
        self.calls[self._names[0]] += 1
        self.open = True

    def shutdown(self) -> None:
        if not self._closing_idle_succeeds:
            self.require()
        self.calls[self._names[1]] += 1
        self.open = False
