"""Tenstorrent Wormhole and Blackhole accelerators for accelkit: experimental, community.

A process sees the devices ``TT_VISIBLE_DEVICES`` selects, read by Tenstorrent's user-mode
driver (tt-umd, under tt-metal and TT-NN) as follows: unset is every device; ``""`` is none; each
comma-separated token is a *logical* id (the device's place in PCI bus order, ``0``..``n-1``) or
part of a PCI bus id with a colon and a dot (``0000:03:00.0``, ``03:00.0``); any other token, or
an id past the end, makes the runtime refuse to start; and the devices are used once each, in bus
order, whatever the token order. Devices are granted whole, as on Ray. A device is a PCI-attached
chip: the second chip of an n300 board sits behind the first, over Ethernet, and comes with it.

Detection: ``tt-smi -s --snapshot_no_tty`` (its JSON snapshot: ``device_info[].board_info``
``bus_id`` and ``board_type``), else the driver's ``/dev/tenstorrent/<N>`` files, with the PCI
functions of vendor ``0x1e52`` (Wormhole ``0x401e``, Blackhole ``0xb140``) for bus ids and
architecture. Sources, and what is not confirmed: the package's README.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Optional

from accelkit import AcceleratorManager, Device, Host, hookimpl, note
from accelkit.detect import (
    NOTHING_VISIBLE,
    detect_layers,
    find_field,
    first_records,
    is_index,
    normalise_bus_id,
    pci_devices,
    split_ids,
    type_label,
)

VARIABLE = "TT_VISIBLE_DEVICES"
SNAPSHOT = ("tt-smi", "-s", "--snapshot_no_tty")
DEVICE_DIR = "/dev/tenstorrent"
VENDOR = 0x1E52
PCI_ARCHES = {0x401E: "Tenstorrent-Wormhole", 0xB140: "Tenstorrent-Blackhole"}
BOARD_ARCHES = (  # tt-smi board types: n150, n300, galaxy: Wormhole; p100, p150, p300: Blackhole
    (r"^n\d|wormhole|galaxy", "Tenstorrent-Wormhole"),
    (r"^p\d|blackhole", "Tenstorrent-Blackhole"),
)
UNCONFIRMED = (
    "not confirmed by Tenstorrent's documentation (read from tt-umd's source): how "
    "TT_VISIBLE_DEVICES treats spaces around tokens (read here as ignored), and that tt-smi "
    "gives remote chips no bus id; see accelkit-tenstorrent's README"
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
        order; one token of another kind hides every device, as the runtime then fails."""
        tokens = split_ids(env.get(VARIABLE), NOTHING_VISIBLE)
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
        bus id contains it."""
        if is_bus_id(token):
            return device.pci_bus_id is not None and token.lower() in device.pci_bus_id
        return token == device.id

    def detect(self, host: Host) -> list[Device]:
        """tt-smi's snapshot, else /dev/tenstorrent with the PCI functions of vendor 0x1e52."""
        note(UNCONFIRMED)
        return detect_layers(host, ("command", from_tt_smi), ("devfs", from_devfs))


def is_bus_id(token: str) -> bool:
    """tt-umd's test for a bus-id token: it holds a colon and a dot."""
    return ":" in token and "." in token


def from_tt_smi(host: Host) -> Optional[list[Device]]:
    """The snapshot's chips with a bus id, numbered 0.. in bus order; chips without one are
    remote, reached through a local chip."""
    records = first_records(host, SNAPSHOT)
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
        Device(str(i), model=board, type_label=type_label(board, BOARD_ARCHES), pci_bus_id=bus)
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
