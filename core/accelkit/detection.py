"""Deprecated: the helpers the plugin guide once documented here now live in
:mod:`accelkit.detect`, the versioned public toolkit. Import them from there; this module goes
away in the next contract version."""

from __future__ import annotations

import warnings

from .detect import (
    call_probe,
    detect_layers,
    import_library,
    parse_csv,
    parse_json,
    pci_devices,
    read_int,
    read_value,
    run_command,
)

__all__ = [
    "call_probe",
    "detect_layers",
    "import_library",
    "parse_csv",
    "parse_json",
    "pci_devices",
    "read_int",
    "read_value",
    "run_command",
]

warnings.warn(
    "accelkit.detection is deprecated: import the same names from accelkit.detect",
    DeprecationWarning,
    stacklevel=2,
)
