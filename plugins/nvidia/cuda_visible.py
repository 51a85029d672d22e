"""``CUDA_VISIBLE_DEVICES`` read as the CUDA driver reads it.

Measured with ``cuInit`` in a fresh process per value on an H100 and an H200 (driver 580, CUDA 13;
``tests/plugins/data/``, VENDOR_NOTES "Measured on a real NVIDIA H100"): the driver reads tokens
left to right and stops at the first one it cannot use, keeping what came before. The first token
says what the list holds:

- A list that begins with ``GPU-`` or ``MIG-`` (in capitals: ``gpu-`` is no UUID) holds UUIDs,
  each token beginning with either word. After the word come hexadecimal digits in any case,
  with dashes anywhere ignored (``GPU-409195b00254`` is ``GPU-409195b0-0254-...``); they name the
  device whose UUID begins with them. The word is not compared (``MIG-`` with a GPU's digits
  names that GPU), and once 32 digits are read the rest of the token is ignored
  (``GPU-<uuid>/0/0`` is the GPU); any other character before that (a space, ``z``) makes a
  token CUDA cannot use.
- Any other list holds ordinals, each read like C's ``strtoul`` into an ``int``: leading white
  space, one sign, ASCII digits, and whatever follows ignored, so ``"+0"``, ``"-0"``, ``"00"``,
  ``"0x0"`` and ``" 0"`` are all GPU 0. The number keeps its low 32 bits (``"4294967296"`` is GPU
  0, ``"2147483648"`` negative, a number past 64 bits all ones); a negative one, or a token
  without digits (``""``, ``"abc"``, ``"--0"``, a UUID, Arabic-Indic digits) ends the list, so
  ``",0"`` shows nothing and ``"0,GPU-..."`` only GPU 0 (``"0,GPU-<its UUID>,0"`` shows the GPU
  once, where reading on would name it twice, as ``"GPU-<its UUID>,MIG-<its UUID>"`` does).

A device named twice before the list ends (``"0,0"``, ``"0, 0"``, a UUID and its prefix) makes
``cuInit`` fail with CUDA_ERROR_INVALID_DEVICE: the process sees no GPU at all. A token that
names no device ends the list too (``"1,0"`` on a one-GPU machine shows nothing); that needs the
detected devices, so node detection applies it (``accelkit.node``), with this plugin's
``matches``.

Where this reading differs from the driver's, it offers less, never a GPU a process might not
see: a device named twice after a token that names no device (``"0,1,0"`` on one GPU, where the
driver stops at ``1`` and shows GPU 0) is refused all the same, because which tokens name devices
is known only after detection. Not measured (MIG was off on both machines): a MIG instance is
named by a ``MIG-`` UUID only (:func:`names_uuid`), and ``MIG-GPU-<uuid>/<gi>/<ci>``, the
instance ids of drivers before R470, is read as an id taken whole.
"""

from __future__ import annotations

import re
from typing import Optional

__all__ = ["cuda_ids", "names_uuid"]

ORDINAL = r"(?a)[ \t\n\v\f\r]*([+-]?)([0-9]+)"  # strtoul's prefix; the rest ignored
UUID_WORDS = ("GPU-", "MIG-")
LEGACY_MIG = r"(?a)MIG-GPU-[0-9a-fA-F-]+/[0-9]+/[0-9]+"
"""A MIG instance as drivers before R470 named it (its GPU's UUID, GPU and compute instance):
not measured, as no such driver was at hand; an id of a device by that name, taken whole."""
HEX_DIGITS = "0123456789abcdefABCDEF"
UUID_DIGITS = 32
ULONG_MAX = 2**64 - 1
"""What ``strtoul`` returns for a number past 64 bits: -1 as an ``int``, naming no GPU."""


def cuda_ids(value: Optional[str]) -> Optional[list[str]]:
    """The ids CUDA shows for ``value``: ordinals in plain decimal (``"+0"`` -> ``"0"``), UUIDs
    as written up to the 32nd digit.

    None (unset) stays None. ``ValueError`` when a device is named twice: CUDA then refuses to
    start, so the caller reports the value and shows nothing.
    """
    if value is None:
        return None
    tokens = value.split(",")
    uuids = tokens[0].startswith(UUID_WORDS)
    named = _Named()
    ids: list[str] = []
    for token in tokens:
        if uuids and _uuid_digits(token):
            cuda_id: Optional[str] = _read_part(token)
        elif uuids and re.fullmatch(LEGACY_MIG, token):
            cuda_id = token
        elif uuids:
            cuda_id = None
        else:
            cuda_id = _ordinal(token)
        if cuda_id is None:
            break
        named.refuse_a_second_naming(token, cuda_id)
        ids.append(cuda_id)
    return ids


def names_uuid(token: str, uuid: Optional[str]) -> bool:
    """Whether the UUID token names the device with ``uuid``: its digits begin the UUID's. The
    word in any case: an operator's ``ACCELKIT_EXCLUDE_DEVICES`` may write ``gpu-...``, and a
    list of CUDA's never holds one (:func:`cuda_ids` ends there). A MIG instance's UUID is named
    by a ``MIG-`` token only: ``GPU-`` with its digits was not measured."""
    word = token[: len("GPU-")].upper()
    if word == "GPU-" and uuid is not None and uuid.startswith("MIG-"):
        return False
    digits = _uuid_digits(word + token[len("GPU-") :])
    own = _uuid_digits(uuid or "")
    return digits is not None and own is not None and own.startswith(digits)


def _ordinal(token: str) -> Optional[str]:
    """The ordinal ``strtoul`` reads into an ``int``, in plain decimal; None where CUDA stops."""
    match = re.match(ORDINAL, token)
    if match is None:
        return None
    sign, digits = match.groups()
    digits = digits.lstrip("0") or "0"  # as many zeros as it likes: int() takes 4300 digits
    if len(digits) > len(str(ULONG_MAX)):  # past 64 bits
        return None
    magnitude = int(digits)
    if magnitude > ULONG_MAX:
        return None
    if sign == "-":
        magnitude = -magnitude  # strtoul negates in unsigned arithmetic: the low bits are these
    low_bits = magnitude & 0xFFFF_FFFF
    if low_bits >= 2**31:  # negative as an int
        return None
    return str(low_bits)


def _uuid_digits(text: str) -> Optional[str]:
    """The hexadecimal digits CUDA compares of a ``GPU-``/``MIG-`` UUID (or a prefix of one):
    lowercase, dashes dropped, at most 32; None for text CUDA reads as no UUID."""
    if not text.startswith(UUID_WORDS):
        return None
    digits = ""
    for char in text[len("GPU-") :]:
        if len(digits) == UUID_DIGITS:
            break  # the rest of the token is not read
        if char == "-":
            continue
        if char not in HEX_DIGITS:
            return None
        digits += char.lower()
    if not digits:
        return None
    return digits


def _read_part(token: str) -> str:
    """The UUID token up to its 32nd digit, the part CUDA reads (``GPU-<uuid> x`` is
    ``GPU-<uuid>``): an id that can be written back. A shorter token, as written."""
    digits = 0
    for position, char in enumerate(token[len("GPU-") :], start=len("GPU-")):
        if char in HEX_DIGITS:
            digits += 1
        if digits == UUID_DIGITS:
            return token[: position + 1]
    return token


class _Named:
    """The GPUs a list has named so far, to refuse a second naming in one step per token (a
    value may hold any number of tokens): ordinals by value, UUIDs by their digits and each
    prefix of them (a UUID and its prefix name one GPU)."""

    def __init__(self) -> None:
        """Nothing named yet."""
        self.ordinals: dict[str, str] = {}  # ordinal -> the token that named it
        self.uuids: dict[str, str] = {}  # UUID digits -> the token
        self.uuid_prefixes: dict[str, str] = {}  # every prefix of those digits -> the token

    def refuse_a_second_naming(self, token: str, cuda_id: str) -> None:
        """``ValueError`` where ``cuda_id`` names a GPU an earlier token names: the same
        ordinal, or UUID digits where one's begin the other's (both name one GPU, or the list
        ends before the second: see the module); else remember it."""
        digits = _uuid_digits(cuda_id)
        if digits is None:
            self._refuse(self.ordinals.get(cuda_id), token, f"GPU {cuda_id}")
            self.ordinals[cuda_id] = token
            return
        earlier = self.uuid_prefixes.get(digits)  # this one begins an earlier one
        for length in range(1, len(digits) + 1):  # an earlier one begins this one
            if earlier is None:
                earlier = self.uuids.get(digits[:length])
        self._refuse(earlier, token, "the same GPU")
        self.uuids[digits] = token
        for length in range(1, len(digits) + 1):
            self.uuid_prefixes.setdefault(digits[:length], token)

    @staticmethod
    def _refuse(earlier: Optional[str], token: str, named: str) -> None:
        """``ValueError`` naming both tokens, where an ``earlier`` one named the GPU."""
        if earlier is not None:
            raise ValueError(
                f"{named} is named twice ({earlier!r} and {token!r}); CUDA then fails to "
                "initialise (CUDA_ERROR_INVALID_DEVICE) and the process sees no GPU: name each "
                "GPU once"
            )
