"""Keeping what vendor libraries print off accelkit's own stdout.

``import amdsmi`` on a machine without ROCm prints a hint to stdout before it raises; a
scheduler reading ``accelkit ls --json`` would then get text before the JSON. Libraries print
from Python (``print``) and from C (straight to file descriptor 1), so both are caught.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator

__all__ = ["stdout_captured"]

_LIMIT = 1 << 16  # what a note can use of the text; a library printing more is not read further


@contextlib.contextmanager
def stdout_captured() -> Iterator[list[str]]:
    """Inside the block, stdout (``sys.stdout`` and descriptor 1) goes to a buffer; the list
    yielded holds its text once the block ends.

    Where descriptor 1 cannot be duplicated (closed, or not a real file), only Python-level
    printing is caught. Stdout is process-wide: another thread printing inside the block is
    caught too, which is why blocks stay as short as one import.
    """
    captured: list[str] = []
    python_level = io.StringIO()
    sink, saved = _redirect_descriptor()
    try:
        with contextlib.redirect_stdout(python_level):
            yield captured
    finally:
        from_c = b""
        if sink is not None and saved is not None:
            os.dup2(saved, 1)
            os.close(saved)
            os.lseek(sink, 0, os.SEEK_SET)
            from_c = os.read(sink, _LIMIT)
            os.close(sink)
        captured.append(python_level.getvalue() + from_c.decode("utf-8", "replace"))


def _redirect_descriptor() -> tuple[int | None, int | None]:
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
    sink = create("accelkit-captured-stdout")
    os.dup2(sink, 1)
    return sink, saved
