"""``ROCR_VISIBLE_DEVICES``, then ``HIP_VISIBLE_DEVICES`` (or CUDA's), read as ROCm's sources do.

ROCr (ROCR-Runtime ``runtime/hsa-runtime/core/runtime/amd_filter_device.cpp``, commit c7785a6,
October 2024): ``RvdFilter::BuildRvdTokenList`` splits the value with ``getline`` on ``,`` (a
trailing comma adds no token), upper-cases each token (ASCII) and trims C white space;
``RvdFilter::BuildUsrDeviceList`` reads a token starting with ``G`` as a UUID
(``ProcessUuidToken``: 5 to 20 characters, a prefix of exactly one device's ``GPU-`` and 16
upper-case hex digits), any other with ``strtol(token, &end, 0)`` (``"0x1"`` is 1, ``"010"`` is
8, ``"-0"`` is 0) that must consume the whole token, the ``long`` stored in an ``int32_t``. It
stops at the first token that fails, names no device (negative or past the last GPU) or repeats
an index. An empty token (``"0,,1"``, ``" "``) reaches ``token.at(0)``, which throws
``std::out_of_range``; ``hsa_init`` catches it and fails, so HIP sees no GPU: we raise
``ValueError`` (nothing visible, an error diagnostic). ``""`` selects no GPU
(``SelectZeroDevices``); white space alone throws, and reads as ``[]`` here (no GPU either
way). ROCr reads only as many tokens as there are GPUs, so an empty token
past that count is harmless to it; not knowing the count here, we refuse the value anyway (a
process is never offered a GPU it might not see).

HIP (clr ``rocclr/device/rocm/rocdevice.cpp``, ``Device::init``, commit f9f995c, October 2024)
reads ``HIP_VISIBLE_DEVICES`` unless it is empty (unset and ``""`` are one to it), else
``CUDA_VISIBLE_DEVICES``; if that is empty too there is no restriction. Tokens are split on
``,`` and not trimmed; one containing ``GPU-`` becomes the index of the first of ROCr's GPUs
whose ``HSA_AMD_AGENT_INFO_UUID`` (``GPU-`` and 16 lower-case hex digits) contains it; then
``atoi`` must give back the token exactly (``"1"``, never ``"01"``, ``"+1"`` or ``" 1"``) and the
index must be below ROCr's count, or the list ends; a repeated index is skipped. As the UUID
holds ``GPU-`` only at its start, containing a token means starting with it.

Not determinable from the variables, so read the cautious way: a HIP UUID token under a ROCr
list ends the list where a ROCr id before its match might also match it (an index, or a shorter
UUID prefix); a UUID prefix two devices share names none (HIP would take the first).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Optional

from accelkit import note

__all__ = ["hip_ids", "names_uuid", "rocm_visible", "rocr_ids"]

C_SPACE = " \t\n\v\f\r"
ASCII_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
STRTOL = r"(?a)([+-]?)(?:0X([0-9A-F]+)|(0[0-7]*)|([1-9][0-9]*))"
ROCR_UUID = r"(?a)GPU-[0-9A-F]{1,16}"  # what can prefix a ROCr UUID
HIP_UUID = r"(?a)GPU-[0-9a-f]{1,16}"  # what can prefix an agent's UUID
HIP_INDEX = r"(?a)0|[1-9][0-9]*"
LONG_MAX = 2**63 - 1


def rocm_visible(env: Mapping[str, str]) -> Optional[list[str]]:
    """ROCr's list, narrowed by HIP's (or CUDA's) tokens read relative to it; None if neither."""
    rocr = rocr_ids(env.get("ROCR_VISIBLE_DEVICES"))
    hip_value = env.get("HIP_VISIBLE_DEVICES") or env.get("CUDA_VISIBLE_DEVICES") or None
    return hip_ids(hip_value, rocr)


def rocr_ids(value: Optional[str]) -> Optional[list[str]]:
    """ROCr's ids: indices in plain decimal, UUID prefixes upper-cased; ``ValueError`` where an
    empty token makes ROCr throw."""
    if value is None:
        return None
    if value.strip(C_SPACE) == "":  # "" selects none; " " throws in ROCr: no GPU either way
        return []
    tokens = value.split(",")
    if value.endswith(","):  # getline yields no token after a trailing separator
        tokens.pop()
    ids: list[str] = []
    for position, raw in enumerate(tokens):
        token = raw.translate(ASCII_UPPER).strip(C_SPACE)
        if not token:
            raise ValueError(
                f"ROCR_VISIBLE_DEVICES has an empty token in {value!r:.80}; ROCr then fails to "
                "initialise (std::out_of_range in RvdFilter::BuildUsrDeviceList)"
            )
        rocr_id = rocr_token(token)
        if rocr_id is None or rocr_id in ids:
            note(list_ends(raw, rocr_id, tokens[position:]), "warning")
            break
        ids.append(rocr_id)
    return ids


def list_ends(raw: str, rocr_id: Optional[str], rest: Sequence[str]) -> str:
    """The warning for the token where ROCr stops reading (as the core words a token that names
    no device), with every token it leaves out."""
    if rocr_id is None:
        what = "which ROCr cannot read (neither an index nor a GPU- UUID prefix)"
    else:
        what = f"GPU {rocr_id} again"
    left_out = ", ".join(repr(t) for t in rest[:8]) + (f" (+{len(rest) - 8})" if rest[8:] else "")
    return (
        f"ROCR_VISIBLE_DEVICES names {raw!r:.40}, {what}; the runtime stops reading the list "
        f"there, leaving out {left_out} (name each device this node has once)"
    )


def rocr_token(token: str) -> Optional[str]:
    """A trimmed, upper-cased ROCr token as an id, or None where ROCr stops reading."""
    if token.startswith("G"):
        return token if re.fullmatch(ROCR_UUID, token) else None
    number = re.fullmatch(STRTOL, token)
    if number is None:
        return None
    sign, hexa, octal, decimal = number.groups()
    if hexa:
        magnitude = int(hexa, 16)
    elif octal:
        magnitude = int(octal, 8)
    else:
        magnitude = int(decimal)
    value = max(-LONG_MAX - 1, min(LONG_MAX, -magnitude if sign == "-" else magnitude))
    index = (value + 2**31) % 2**32 - 2**31  # the long stored in an int32_t
    return str(index) if index >= 0 else None


def hip_ids(value: Optional[str], rocr: Optional[Sequence[str]]) -> Optional[list[str]]:
    """HIP's tokens (``value``, None or ``""`` for none) as ids, relative to ROCr's list ``rocr``
    where it is set; a UUID token is kept as written where ROCr's is unset."""
    if not value:
        return None if rocr is None else list(rocr)
    ids: list[str] = []
    for token in value.split(","):
        hip_id = hip_token(token, rocr)
        if hip_id is None:
            break
        if hip_id not in ids:
            ids.append(hip_id)
    return ids


def hip_token(token: str, rocr: Optional[Sequence[str]]) -> Optional[str]:
    """One HIP token as an id (an entry of ``rocr`` where set), or None where HIP stops."""
    if "GPU-" in token:
        if not re.fullmatch(HIP_UUID, token):
            return None  # no agent's UUID contains it (or only an id-less "GPU-XX" one)
        return token if rocr is None else hip_uuid_in(token, rocr)
    if not re.fullmatch(HIP_INDEX, token):
        return None
    if rocr is None:
        return token
    index = int(token)
    return rocr[index] if index < len(rocr) else None


def hip_uuid_in(token: str, rocr: Sequence[str]) -> Optional[str]:
    """The first of ROCr's ids whose device's UUID surely starts with ``token``; None where one
    before it might match too, or none does."""
    wanted = token.translate(ASCII_UPPER)
    for rocr_id in rocr:
        if not rocr_id.startswith("GPU-"):
            return None  # an index: its UUID is not known here
        if rocr_id.startswith(wanted):
            return rocr_id
        if not wanted.startswith(rocr_id):
            continue  # that device's UUID surely does not start with the token
        return None  # a shorter prefix: its UUID may or may not go on as the token does
    return None


def names_uuid(token: str, uuid: Optional[str]) -> bool:
    """Whether a ``GPU-`` token names the GPU with ``uuid``: a prefix of it of 5 to 20 characters
    in any case (ROCr's upper-cased tokens, HIP's lower-case ones)."""
    if uuid is None or not 5 <= len(token) <= 20:
        return False
    return uuid.translate(ASCII_UPPER).startswith(token.translate(ASCII_UPPER))
