"""Tenstorrent Wormhole and Blackhole accelerators for accelkit: experimental, community.

A process sees the devices ``TT_VISIBLE_DEVICES`` selects, read by Tenstorrent's user-mode driver
(tt-umd, under tt-metal and TT-NN; ``device/pcie/pci_device.cpp``,
``PCIDevice::enumerate_devices``) as follows: unset is every device; ``""`` is none; spaces around
a token are dropped; a token of digits is a *logical* id, the device's place in PCI bus order
(``0``..``n-1``; so from tt-umd 0.9.3, #2057: before, it was the ``N`` of
``/dev/tenstorrent/<N>``); a token holding ``:`` or ``.`` and otherwise only hex digits is part of
a bus id and names every device whose bus id contains it (``0000:03:00.0``, ``03:00``, ``0000:c``;
tt-umd ``device/common/utils.hpp`` ``is_bdf_string``); any other token, an id past the end, or a
bus-id token that names no device makes the runtime refuse to start (``std::runtime_error``); and
the devices are used once each, in bus order, whatever the token order. A token of another kind
reads as nothing visible here, as tt-umd then runs nothing. An id past the end and a bus-id token
naming no device do not: ``read_visible`` cannot see the devices, and accelkit's core ends a list
at the first token naming no detected device, with a warning, keeping the tokens before it
(``TT_VISIBLE_DEVICES=0,7`` on 4 devices: tt-umd refuses to start, accelkit offers device 0). A
bus-id token that names several devices (``0000:c``, a Galaxy tray) ends the list the same way,
where tt-umd takes them all. Devices are granted whole, as on Ray. A device is a PCI-attached chip:
the second chip of an n300 board sits behind the first, over Ethernet, and comes with it.

Detection: ``tt-smi -s --snapshot_no_tty`` (its JSON snapshot: ``device_info[].board_info``
``bus_id`` and ``board_type``; tt-smi 3.0.5 and later: before, ``-s`` wrote a file and printed no
JSON, and the flag did not exist, so the device files answer), run with ``TT_VISIBLE_DEVICES``
lifted, since tt-smi enumerates through tt-umd and would list only the devices the variable leaves
(numbered from 0 again); accelkit then applies the variable to every device. Else the driver's
``/dev/tenstorrent/<N>`` files, with the PCI functions of vendor ``0x1e52`` (Wormhole ``0x401e``,
Blackhole ``0xb140``) for bus ids and architecture. Board names are tt-smi's (``tt_smi/utils.py``,
``get_board_type``). Sources, and what is not confirmed: the package's README.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Optional

from accelkit import AcceleratorManager, Device, Host, hookimpl, note
from accelkit.detect import (
    detect_layers,
    find_field,
    first_records,
    is_index,
    normalise_bus_id,
    pci_devices,
    read_int,
    split_ids,
)

VARIABLE = "TT_VISIBLE_DEVICES"
SNAPSHOT = ("tt-smi", "-s", "--snapshot_no_tty")
DEVICE_DIR = "/dev/tenstorrent"
VENDOR = 0x1E52
WORMHOLE, BLACKHOLE = "Tenstorrent-Wormhole", "Tenstorrent-Blackhole"
PCI_ARCHES = {0x401E: WORMHOLE, 0xB140: BLACKHOLE}
BOARD_ARCHES = {  # every board tt-smi names (tt_smi/utils.py, get_board_type), by architecture
    **dict.fromkeys(("n150", "n300", "nb_cb", "wh_4u", "tt-galaxy-wh"), WORMHOLE),
    **dict.fromkeys(("bh-scrappy", "p100a", "p150a", "p150b", "p150c"), BLACKHOLE),
    **dict.fromkeys(("p300a", "p300b", "p300c", "tt-galaxy-bh"), BLACKHOLE),
}
DIFFERENCES = (
    "TT_VISIBLE_DEVICES is read as tt-umd 0.9.3+ reads it, but where tt-umd refuses to start (an "
    "id past the end, a bus-id token naming no device: 0,7 on 4 devices) or takes several devices "
    "(0000:c) the list ends with a warning, keeping what came before (device 0); see the README"
)


class TenstorrentManager(AcceleratorManager):
    """Tenstorrent devices: one ``TTNPU`` per PCI-attached chip, granted whole, by logical id."""

    name = "tenstorrent"
    resource_name = "TTNPU"
    visible_devices_env_var = VARIABLE
    fractional = False
    api_version = 2

    def read_visible(self, env: Mapping[str, str]) -> Optional[list[str]]:
        """As tt-umd reads it: logical ids and parts of bus ids, each once, ids in bus (numeric)
        order; ``""`` (and ``NoDevFiles``) or one token of another kind hides every device, as
        the runtime then runs none. Whether a token names a device is the core's to find."""
        tokens = split_ids(env.get(VARIABLE))
        if tokens is None:
            return None
        if not all(is_index(token) or is_bus_id(token) for token in tokens):
            return []
        unique = list(dict.fromkeys(str(int(t)) if is_index(t) else t for t in tokens))
        if all(is_index(token) for token in unique):
            return sorted(unique, key=int)
        return unique

    def matches(self, token: str, device: Device) -> bool:
        """A logical id names the device with that id; part of a bus id names the devices whose
        bus id contains it, compared as tt-umd compares (its bus ids are lower case, and so is
        ``0000:c`` that names a Galaxy tray; ``0000:C`` names nothing)."""
        if is_bus_id(token):
            return device.pci_bus_id is not None and token in device.pci_bus_id
        return token == device.id

    def detect(self, host: Host) -> list[Device]:
        """tt-smi's snapshot, else /dev/tenstorrent with the PCI functions of vendor 0x1e52."""
        note(DIFFERENCES)
        return detect_layers(host, ("command", from_tt_smi), ("devfs", from_devfs))


def is_bus_id(token: str) -> bool:
    """tt-umd's test for a bus-id token (``is_bdf_string``): it holds a ``:`` or a ``.`` and
    nothing but hex digits besides (``03:00``, ``0000:c``; ``0000:zz:00.0`` is no bus id)."""
    return (":" in token or "." in token) and set(token) <= set("0123456789abcdefABCDEF.:")


def board_arch(host: Host, board: str, bus: str) -> Optional[str]:
    """The architecture of tt-smi's board name (its snapshot adds `` L``/`` R`` to Wormhole
    boards: ``n300 L``); for a board it cannot name (``N/A``) or a newer one, the chip's PCI
    device id; else None, never a label made of the name."""
    name = board.split(" ")[0]
    if name in BOARD_ARCHES:
        return BOARD_ARCHES[name]
    device_id = read_int(host, f"/sys/bus/pci/devices/{bus}/device", 16)
    return None if device_id is None else PCI_ARCHES.get(device_id)


def from_tt_smi(host: Host) -> Optional[list[Device]]:
    """The snapshot's chips with a bus id, numbered 0.. in bus order; chips without one are
    remote, reached through a local chip. Asked with ``TT_VISIBLE_DEVICES`` lifted, so it lists
    every device and the ids stay the node's, whatever the variable says (accelkit applies it)."""
    records = first_records(host, SNAPSHOT, env={VARIABLE: None})
    if records is None:
        return None
    local = []
    for record in records:
        bus = normalise_bus_id(find_field(record, "bus_id"))
        board = find_field(record, "board_type")
        if bus is not None:
            local.append((bus, "" if board is None else str(board)))
    if records and not local:  # a remote chip is reached through a local one: not understood
        note("tt-smi lists no chip with a PCI bus id; asking /dev/tenstorrent", "warning")
        return None
    if len(local) < len(records):
        note(f"{len(records) - len(local)} chip(s) without a PCI bus id: remote, not devices")
    return [
        Device(str(i), model=board, type_label=board_arch(host, board, bus), pci_bus_id=bus)
        for i, (bus, board) in enumerate(sorted(local))
    ]


def from_devfs(host: Host) -> Optional[list[Device]]:
    """With the driver's ``/dev/tenstorrent/<N>`` files, devices 0.. in bus order, from the PCI
    functions of vendor 0x1e52 (the files' own numbers are not the logical ids)."""
    files = [name for name in host.listdir(DEVICE_DIR) if is_index(name)]
    if not files:
        return None
    functions = pci_devices(host, VENDOR)
    if len(functions) != len(files):
        note(
            f"{len(files)} /dev/tenstorrent file(s) but {len(functions)} PCI function(s) of "
            "vendor 0x1e52: devices counted from the files, without bus ids",
            "warning",
        )
        return [Device(str(i)) for i in range(len(files))]
    return [
        Device(str(i), type_label=PCI_ARCHES.get(f.device), pci_bus_id=f.bus_id)
        for i, f in enumerate(functions)
    ]


@hookimpl
def accelkit_register_managers() -> list[AcceleratorManager]:
    """The plugin's one manager, for every scheduler that loads accelkit."""
    return [TenstorrentManager()]
