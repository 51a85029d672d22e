"""How much of a vendor tool's output the parsers read: a bound, cut early and said.

A vendor tool prints a few KB for a real machine (``nvidia-smi``'s CSV is about 100 characters a
GPU, ``amd-smi static --json`` under 1 KB a GPU); a broken or hostile one may print megabytes.
Every parser of :mod:`accelkit.detect` reads at most :data:`MAX_OUTPUT` characters and
:data:`MAX_LINES` lines, and keeps at most :data:`~accelkit.device.MAX_DEVICES` records, so
garbage costs what the bound costs whatever its size, never what its size would; what is cut is
noted. Splitting or decoding the whole text first would already cost its size. On this machine
a command or probe process that prints more than the bound is not read further but killed
(:mod:`accelkit.host._processes`): reading it all would already cost its size, and its time.
"""

from __future__ import annotations

import io
from collections.abc import Iterator

from accelkit.device import MAX_DEVICES
from accelkit.diagnostics import note
from accelkit.host._base import MAX_READ_BYTES

__all__ = ["MAX_LINES", "MAX_OUTPUT", "bounded", "lines"]

MAX_OUTPUT = MAX_READ_BYTES
"""The most characters of one output a parser reads: as much as a file is read (1 MiB), some
200 times what the largest real output we know holds."""

MAX_LINES = 16 * MAX_DEVICES
"""The most lines of one output a parser reads: :data:`~accelkit.device.MAX_DEVICES` devices of
16 lines each (``npu-smi info -l`` prints about 10 a card)."""


def bounded(text: str, what: str) -> str:
    """``text``, or its first :data:`MAX_OUTPUT` characters with a warning naming ``what``."""
    if len(text) <= MAX_OUTPUT:
        return text
    note(
        f"{what} is {len(text)} characters, far more than any machine's devices print; reading "
        f"the first {MAX_OUTPUT}",
        "warning",
    )
    return text[:MAX_OUTPUT]


def lines(text: str, what: str) -> Iterator[str]:
    """The lines of ``text`` (as ``str.splitlines`` cuts them), at most :data:`MAX_LINES` of
    its first :data:`MAX_OUTPUT` characters, found one at a time: a caller that stops early
    never pays for the rest."""
    count = 0
    for chunk in io.StringIO(bounded(text, what), newline=""):  # \n, \r and \r\n
        for line in chunk.splitlines():  # and the other breaks splitlines knows
            if count == MAX_LINES:
                note(f"{what} has more than {MAX_LINES} lines; reading the first", "warning")
                return
            count += 1
            yield line
