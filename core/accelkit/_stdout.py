"""Keeping what vendor libraries print off accelkit's own stdout.

``import amdsmi`` on a machine without ROCm prints a hint to stdout before it raises; a
scheduler reading ``accelkit ls --json`` would then get text before the JSON. Libraries print
from Python (``print``) and from C (straight to file descriptor 1), so both are caught.

Stdout is one per process while families detect on several threads, so one capture runs at a
time (the others wait their turn), and a capture whose import never returns is ended by
:func:`end_captures` when detection gives up on it: accelkit's own output must reach stdout
even then. What the hung library prints afterwards may reach stdout; nothing of accelkit's is
lost.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import threading
from collections.abc import Iterator
from typing import Optional, TextIO

__all__ = ["end_captures", "stdout_aside", "stdout_captured"]

_LIMIT = 1 << 16  # what a note can use of the text; a library printing more is not read further
_turn = threading.Condition()  # one capture at a time: descriptor 1 and sys.stdout are one each


class _Redirect:
    """Stdout pointed away (Python level, and descriptor 1 where it can be), until stopped."""

    def __init__(self) -> None:
        self.python_level = io.StringIO()
        self.original: TextIO = sys.stdout
        self.sink, self.saved = _redirect_descriptor()
        sys.stdout = self.python_level
        self.text: Optional[str] = None

    def stop(self) -> str:
        """Put stdout back (once; later calls only answer) and return what was printed."""
        if self.text is None:
            from_c = b""
            if self.sink is not None and self.saved is not None:
                os.dup2(self.saved, 1)
                os.close(self.saved)
                os.lseek(self.sink, 0, os.SEEK_SET)
                from_c = os.read(self.sink, _LIMIT)
                os.close(self.sink)
            sys.stdout = self.original
            self.text = self.python_level.getvalue() + from_c.decode("utf-8", "replace")
        return self.text


_current: Optional[_Redirect] = None
"""The capture running now; None when stdout is free (guarded by ``_turn``)."""


@contextlib.contextmanager
def stdout_captured() -> Iterator[list[str]]:
    """Inside the block, stdout (``sys.stdout`` and descriptor 1) goes to a buffer; the list
    yielded holds its text once the block ends.

    Where descriptor 1 cannot be duplicated (closed, or not a real file), only Python-level
    printing is caught. Blocks run one at a time across threads, so keep them as short as one
    import.
    """
    global _current
    captured: list[str] = []
    with _turn:
        while _current is not None:
            _turn.wait()
        redirect = _current = _Redirect()
    try:
        yield captured
    finally:
        with _turn:
            captured.append(redirect.stop())
            if _current is redirect:  # else end_captures already gave stdout back
                _current = None
                _turn.notify_all()


def end_captures() -> None:
    """Put stdout back if a capture is still running: its import hangs, and detection has given
        up on it (called once every family has answered or the deadline has passed). Captures
    waiting their turn then proceed, so one hung library does not hold up the others."""
    global _current
    with _turn:
        if _current is not None:
            _current.stop()
            _current = None
            _turn.notify_all()


@contextlib.contextmanager
def stdout_aside() -> Iterator[None]:
    """For a command whose stdout a program reads (``eval "$(accelkit env ...)"``, a JSON
    reader): while the block runs (the detection before the output), descriptor 1 and
    ``sys.stdout`` point at stderr, so what a vendor library or a plugin prints outside the
    imports :func:`stdout_captured` catches (an init call, a plugin's ``detect()``, a plugin's
    import) reaches the person, never the reader. The command line's alone: it owns its
    process, where a scheduler's own stdout must be left as it is."""
    sys.stdout.flush()
    try:
        saved: Optional[int] = os.dup(1)
        os.dup2(2, 1)
    except (OSError, ValueError, AttributeError):  # no descriptor 1 or 2: Python level only
        saved = None
    original, sys.stdout = sys.stdout, sys.stderr
    try:
        yield
    finally:
        sys.stderr.flush()
        sys.stdout = original
        if saved is not None:
            os.dup2(saved, 1)
            os.close(saved)


def _redirect_descriptor() -> tuple[Optional[int], Optional[int]]:
    """Point descriptor 1 at an anonymous in-memory file: (that file, the saved original).

    ``memfd_create`` makes no file anywhere (detection writes nothing, which the kit audits) and
    never blocks a writer as a pipe would; (None, None) where it does not exist (not Linux) or
    descriptor 1 cannot be duplicated.
    """
    create = getattr(os, "memfd_create", None)
    if create is None:
        return None, None
    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError, AttributeError):
        return None, None
    try:
        sink = create("accelkit-captured-stdout")
    except OSError:  # out of descriptors or memory: Python-level capture only
        os.close(saved)
        return None, None
    os.dup2(sink, 1)
    return sink, saved
