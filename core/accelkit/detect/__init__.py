"""The public detection toolkit: everything a vendor plugin needs besides ``accelkit`` itself.

Detection runs in layers, best first (the vendor's library, its command's machine-readable
output, then ``/sys``, ``/proc`` and ``/dev``); these helpers run commands and libraries through
the :class:`~accelkit.Host`, parse what vendor tools print (JSON, CSV, ``key : value`` text,
sizes), walk sysfs and PCI, read and write visibility lists, and turn product names into type
labels. None of them raises for an absent or broken vendor stack: each notes why
(:func:`accelkit.note`) and returns None, so the next layer is asked.

The names here are a versioned contract (``accelkit.API_VERSION``), documented with signatures
and an example each in the plugin author's guide (``docs/plugin-authoring.md``, "The detection
toolkit"), which a test keeps equal to :data:`__all__`. Nothing else in ``accelkit`` is for
plugins to import, except the names ``accelkit`` itself exports.
"""

from __future__ import annotations

from accelkit._visibility import (
    NOTHING_VISIBLE,
    is_index,
    join_ids,
    relative_ids,
    split_ids,
    stacked_ids,
    valid_prefix,
)
from accelkit.detect._devfiles import (
    DeviceFile,
    accel_files,
    device_files,
    numbered_files,
    vfio_files,
)
from accelkit.detect._drm import drm_devices
from accelkit.detect._facts import (
    decode,
    device_count,
    find_field,
    json_records,
    library_session,
    parse_int,
    sanitize_label,
    type_label,
)
from accelkit.detect._layers import (
    Layer,
    PciDevice,
    call_probe,
    detect_layers,
    import_library,
    normalise_bus_id,
    numa_node,
    parse_csv,
    parse_json,
    pci_device_at,
    pci_devices,
    read_int,
    read_value,
    run_command,
)
from accelkit.detect._metadata import read_metadata
from accelkit.detect._text import parse_colon_records, parse_memory
from accelkit.detect._tools import first_json, first_records
from accelkit.device import MAX_DEVICES

__all__ = [
    "MAX_DEVICES",
    "NOTHING_VISIBLE",
    "DeviceFile",
    "Layer",
    "PciDevice",
    "accel_files",
    "call_probe",
    "decode",
    "detect_layers",
    "device_count",
    "device_files",
    "drm_devices",
    "find_field",
    "first_json",
    "first_records",
    "import_library",
    "is_index",
    "join_ids",
    "json_records",
    "library_session",
    "normalise_bus_id",
    "numa_node",
    "numbered_files",
    "parse_colon_records",
    "parse_csv",
    "parse_int",
    "parse_json",
    "parse_memory",
    "pci_device_at",
    "pci_devices",
    "read_int",
    "read_metadata",
    "read_value",
    "relative_ids",
    "run_command",
    "sanitize_label",
    "split_ids",
    "stacked_ids",
    "type_label",
    "valid_prefix",
    "vfio_files",
]
