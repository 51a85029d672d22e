"""``CUDA_VISIBLE_DEVICES`` read as the CUDA driver reads it.

Measured on an H100 (driver 580, CUDA 13; VENDOR_NOTES "Measured on a real NVIDIA H100"): the
driver reads tokens left to right and stops at the first one it cannot use, keeping what came
before. An ordinal is read like C's ``strtol``: leading white space, an optional ``+``, ASCII
digits, and whatever follows the digits ignored, so ``"+0"``, ``"00"``, ``"0x0"``, ``"0.0"`` and
``" 0"`` are all GPU 0 while ``"-1"``, ``"abc"``, ``""`` and Arabic-Indic digits stop the list
(``",0"`` shows nothing). A ``GPU-``/``MIG-`` UUID or a unique prefix of one names a device in
any letter case (measured: the whole UUID in capitals). An ordinal given twice (``"0,0"``)
makes ``cuInit`` fail with CUDA_ERROR_INVALID_DEVICE: the process sees no GPU at all. A token
that names no device ends the list too (``"1,0"`` on a one-GPU machine shows nothing); that
needs the detected devices, so node detection applies it (``accelkit.node``), with this
plugin's ``matches``.

Not measured, so read the cautious way (a process is never offered a GPU it might not see): a
``-`` sign ends the list even before ``0``; a UUID token takes no white space around it; and an
ordinal repeated after a token that names no GPU (``"0,1,0"`` on one GPU) is still refused.
"""

from __future__ import annotations

import re
from typing import Optional

__all__ = ["cuda_ids", "names_uuid"]

ORDINAL = r"(?a)[ \t\n\v\f\r]*\+?([0-9]+)"  # strtol's prefix; the rest ignored
UUID = r"(?ai)(?:GPU|MIG)-[0-9a-z/-]+"
LONGEST_ORDINAL = 18  # digits; a longer number names no GPU (strtol would clamp it, CUDA stop)


def cuda_ids(value: Optional[str]) -> Optional[list[str]]:
    """The ids CUDA shows for ``value``, ordinals in plain decimal (``"+0"`` -> ``"0"``).

    None (unset) stays None. ``ValueError`` when an ordinal is given twice: CUDA then refuses to
    start, so the caller reports the value and shows nothing.
    """
    if value is None:
        return None
    ids: list[str] = []
    seen: dict[str, str] = {}
    for token in value.split(","):
        cuda_id = read_token(token)
        if cuda_id is None:
            break
        if cuda_id in seen and cuda_id.isdecimal():
            raise ValueError(
                f"GPU {cuda_id} is named twice ({seen[cuda_id]!r} and {token!r}); CUDA then fails "
                "to initialise (CUDA_ERROR_INVALID_DEVICE) and the process sees no GPU: name each "
                "GPU once"
            )
        seen.setdefault(cuda_id, token)
        ids.append(cuda_id)
    return ids


def read_token(token: str) -> Optional[str]:
    """One token as CUDA reads it: an ordinal in plain decimal, a UUID (prefix) as written, or
    None where CUDA stops reading."""
    ordinal = re.match(ORDINAL, token)
    if ordinal:
        digits = ordinal[1].lstrip("0") or "0"
        return digits if len(digits) <= LONGEST_ORDINAL else None
    return token if re.fullmatch(UUID, token) else None


def names_uuid(token: str, uuid: Optional[str]) -> bool:
    """Whether ``token`` is ``uuid`` or a prefix of it beyond ``GPU-``/``MIG-``, in any case."""
    if uuid is None or len(token) <= len("GPU-"):
        return False
    return uuid.lower().startswith(token.lower())
