"""Shared detection mechanics, so each vendor plugin is only its data sheet.

Detection runs in layers, best first: the vendor's Python library, then its command's
machine-readable output, then ``/sys``, ``/proc`` and ``/dev``. The first layer that *answers*
(returns a list, even an empty one) wins; a layer that is absent returns None, a layer that
breaks is reported, and either way the next layer is asked. Nothing here raises for a missing or
broken vendor stack: it notes why, through :func:`accelkit.note`.

The winning layer's devices are completed here, so no plugin repeats it: ``source`` is set, a
PCI bus id in any tool's spelling is normalised to sysfs's (``0000:17:00.0``; an unreadable one
is dropped), the NUMA node is read from ``/sys/bus/pci/devices/<bus id>/numa_node`` when the layer
did not give it, and empty or "N/A" text facts become None.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Sequence
from types import ModuleType
from typing import Any, Callable, NamedTuple, Optional

from accelkit._stdout import stdout_captured
from accelkit.detect._bounds import MAX_OUTPUT, bounded, lines
from accelkit.detect._sessions import run_library_layer
from accelkit.device import MAX_DEVICES, Device
from accelkit.diagnostics import Level, note
from accelkit.errors import ProbeError
from accelkit.host import CommandResult, Host, ProbeEnv
from accelkit.host._base import MAX_READ_BYTES, ProbeFunction, run_on

__all__ = [
    "Layer",
    "PciDevice",
    "call_probe",
    "detect_layers",
    "import_library",
    "listed_vendors",
    "normalise_bus_id",
    "numa_node",
    "parse_csv",
    "parse_json",
    "pci_device_at",
    "pci_devices",
    "read_int",
    "read_value",
    "run_command",
]

Layer = Callable[[Host], Optional[list[Device]]]
"""A detection layer: the devices it sees, or None when its source is not there."""

LAYER_FAULT = r"(?s)^(?P<source>.+?) layer (?:failed|timed out): (?P<error>.+)$"
"""How :func:`detect_layers` words its note about a layer that raised or timed out: the
conformance kit looks for it on the backdoor's host, where no layer may fail."""

_BUS_ID = r"(?i)^(?:([0-9a-f]{1,8}):)?([0-9a-f]{1,2}):([0-9a-f]{1,2})\.([0-7])$"
_NOT_AVAILABLE = ("", "N/A", "[N/A]", "n/a", "-")


def detect_layers(host: Host, *layers: tuple[str, Layer]) -> list[Device]:
    """Ask ``(source, layer)`` pairs in order; the first that answers wins.

    A ``library`` layer runs off this thread, and its work in a vendor library
    (:func:`~accelkit.detect.library_session`) is cut at ``ACCELKIT_LIBRARY_TIMEOUT`` as a
    whole: a call that hangs anywhere in it costs that layer only (``_sessions``).

    The winning layer's devices are completed (see the module docstring): ``source`` set unless
    the layer set it, so a reader of the node knows which layer spoke; bus id normalised; NUMA
    node from sysfs; "N/A" facts None.
    """
    for source, layer in layers:
        try:  # a library layer's session in a vendor library is bounded as a whole (_sessions)
            devices = run_library_layer(host, layer) if source == "library" else layer(host)
        except TimeoutError as exc:  # a hung library: cut at its budget, the next layer answers
            note(f"{source} layer timed out: {exc}", "error")
            continue
        except Exception as exc:  # a broken layer must not hide the next one
            note(f"{source} layer failed: {type(exc).__name__}: {exc}", "warning")
            continue
        if devices is None:
            continue
        note(f"{len(devices)} device(s) from the {source} layer")
        return [_completed(host, device, source) for device in devices]
    note("no detection layer answered: no devices")
    return []


def _completed(host: Host, device: Device, source: str) -> Device:
    bus = normalise_bus_id(device.pci_bus_id)
    numa = numa_node(host, bus) if device.numa_node is None else device.numa_node
    texts = {"model": device.model, "uuid": device.uuid, "type_label": device.type_label}
    return device.replace(
        source=device.source or source,
        pci_bus_id=bus,
        numa_node=numa if numa is not None and numa >= 0 else None,
        **{k: None if v is None or v.strip() in _NOT_AVAILABLE else v for k, v in texts.items()},
    )


def numa_node(host: Host, bus_id: object) -> Optional[int]:
    """The NUMA node of PCI device ``bus_id`` (any spelling) from sysfs; None when unknown
    (sysfs says -1 on a machine without NUMA)."""
    bus = normalise_bus_id(bus_id)
    node = None if bus is None else read_int(host, f"/sys/bus/pci/devices/{bus}/numa_node", 10)
    return node if node is not None and node >= 0 else None


def normalise_bus_id(value: object) -> Optional[str]:
    """A PCI bus id as sysfs names it (``0000:17:00.0``) from any tool's spelling: NVML's
    ``00000000:17:00.0``, neuron-ls's ``17:00.0``, upper case, ``bytes``; None if unreadable."""
    text = value.decode(errors="replace") if isinstance(value, bytes) else value
    found = re.match(_BUS_ID, text.strip()) if isinstance(text, str) else None
    if found is None:
        return None
    domain, bus, slot, function = found.groups()
    return f"{int(domain or '0', 16):04x}:{int(bus, 16):02x}:{int(slot, 16):02x}.{function}"


def import_library(host: Host, name: str) -> Optional[ModuleType]:
    """Import a vendor library in-process, or note why not and return None.

    What the library prints while importing is kept as a note, never on stdout. A binding that
    raises ``KeyError`` or ``OSError`` while loading its C library (``import amdsmi`` without
    ROCm) is installed without its vendor stack: an ``info`` note, like a missing library.
    """
    module: Optional[ModuleType] = None
    with stdout_captured() as printed:
        try:
            module = host.import_module(name)
        except ImportError:
            note(f"Python library {name} is not installed")
        except (KeyError, OSError) as exc:
            note(f"{name} is installed but its C library is not: {type(exc).__name__}: {exc}")
        except Exception as exc:
            note(f"importing {name} failed: {type(exc).__name__}: {exc}", "warning")
    if printed[0].strip():
        note(f"importing {name} printed: {' '.join(printed[0].split())[:300]}")
    return module


def call_probe(
    host: Host,
    function: ProbeFunction,
    *args: Any,
    timeout: Optional[float] = None,
    expect: type = object,
    env: Optional[ProbeEnv] = None,
    library: Optional[str] = None,
) -> Any:
    """Run a library probe in its own process; None (with a note) when it cannot answer or
    answers something other than an ``expect`` (a probe returns plain JSON data).

    ``env`` changes the probe process's environment only (``{"NAME": None}`` removes a
    variable). ``library`` names the module the probe imports: when the host knows it is not
    installed (:meth:`~accelkit.Host.has_library`), no probe process is started.
    """
    what = f"{function.__module__}.{function.__qualname__}"
    if library is not None and not host.has_library(library):
        note(f"Python library {library} is not installed")
        return None
    try:
        if env:
            found = host.probe(function, *args, timeout=timeout, env=env)
        else:  # Host subclasses written before ``env`` existed keep working
            found = host.probe(function, *args, timeout=timeout)
    except ImportError as exc:
        note(f"probe {what}: library not installed ({exc})")
        return None
    except TimeoutError as exc:
        note(f"probe {what} timed out: {exc}", "error")
        return None
    except ProbeError as exc:
        note(f"probe {what} failed: {exc}", "error" if exc.crashed else "warning")
        return None
    if not isinstance(found, expect):
        shown = repr(found)[:120]
        note(f"probe {what} returned {shown}, not a {expect.__name__}; ignoring it", "warning")
        return None
    return found


def run_command(
    host: Host,
    argv: Sequence[str],
    timeout: Optional[float] = None,
    failing: Level = "warning",
    env: Optional[ProbeEnv] = None,
    *,
    partial: Optional[Callable[[CommandResult], Optional[str]]] = None,
) -> Optional[str]:
    """A command's stdout when it exits 0; None (with a note) when missing, failing or hanging.

    A non-zero exit is noted at level ``failing`` (``"info"`` where failing is expected, as an
    older tool rejecting a newer flag), unless ``partial`` reads it as an answer: a tool that
    documents an exit status for "some of it" (nvidia-smi's 15, a GPU it cannot reach, beside
    the rows of those it can) is given the whole result, and returns the text to use, or None
    for a failure like any other. A missing program asked again (another flag spelling,
    another layer) is noted once: :func:`accelkit.note` keeps a finding once per family.
    ``env`` changes the command's environment only (``{"NAME": None}`` removes a variable): a
    tool that lists only the devices the family's variable leaves is asked with it lifted.
    """
    shown = " ".join(argv)
    try:
        result = run_on(host, argv, timeout, env)
    except FileNotFoundError:
        note(f"{argv[0]} is not installed")
        return None
    except TimeoutError as exc:
        note(f"`{shown}` timed out: {exc}", "error")
        return None
    except OSError as exc:
        note(f"`{shown}` failed: {exc}", "warning")
        return None
    answer = None if result.returncode == 0 or partial is None else partial(result)
    if answer is not None:
        return bounded(answer, f"`{shown}` output")
    if result.returncode != 0:
        detail = _error_line(result.stderr, shown) or _error_line(result.stdout, shown)
        note(
            f"`{shown}` exited with {result.returncode}" + (f": {detail}" if detail else ""),
            failing,
        )
        return None
    return bounded(result.stdout, f"`{shown}` output")


_ERROR_WORDS = (
    r"(?i)\b(?:error|fail\w*|unable|cannot|can't|couldn't|could not|not found|invalid|denied)\b"
)
"""Words of a line that says what went wrong (a pattern: compiled on first use, not at start)."""


def _error_line(text: str, shown: str) -> str:
    """The line of a failed command's output to quote: the last one that reads as an error
    (a tool may print it among the rows it could still give, nvidia-smi's "Unable to determine
    the device handle ..." among the healthy GPUs'), else the last line; cut at 200 characters."""
    found = [line.strip() for line in lines(text, f"`{shown}` output") if line.strip()]
    errors = [line for line in found if re.search(_ERROR_WORDS, line)]
    return (errors or found or [""])[-1][:200]


def parse_json(text: Optional[str], what: str) -> Any:
    """Parsed JSON, or None with a note when ``text`` is missing or not JSON.

    Text longer than :data:`~accelkit.detect._bounds.MAX_OUTPUT` is refused unread (cut short it
    would not be JSON, and parsing it whole would cost its size).
    """
    if text is None:
        return None
    if len(text) > MAX_OUTPUT:
        note(
            f"{what} is {len(text)} characters, more than the {MAX_OUTPUT} accelkit reads; "
            "ignoring it",
            "warning",
        )
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        note(f"{what} is not valid JSON ({exc}); ignoring it", "warning")
        return None


def parse_csv(text: Optional[str], fields: int, what: str) -> Optional[list[list[str]]]:
    """Rows of a headerless CSV with exactly ``fields`` stripped columns; bad rows are noted.

    None when ``text`` is None or no row is usable, so a garbled output falls to the next layer.
    Blank output is ``[]``, noted: a layer that lists devices may take it as no answer. At most
    :data:`~accelkit.device.MAX_DEVICES` rows are kept, of the first lines of the text
    (:func:`accelkit.detect._bounds.lines`): reading stops there, with a note.
    """
    if text is None:
        return None
    rows: list[list[str]] = []
    blank = True
    for number, line in enumerate(lines(text, what), 1):
        if not line.strip():
            continue
        blank = False
        if len(rows) == MAX_DEVICES:
            note(f"{what} has more than {MAX_DEVICES} rows; keeping the first", "error")
            break
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != fields:
            note(
                f"{what} line {number} has {len(cells)} fields, expected {fields}: {line!r}",
                "warning",
            )
            continue
        rows.append(cells)
    if blank:
        note(f"{what} is empty", "warning")
        return []
    if not rows:
        note(f"{what} had no usable rows", "warning")
        return None
    return rows


def read_value(host: Host, path: str) -> Optional[str]:
    """A one-value sysfs/proc file, stripped; None when missing, empty, or unreadable (binary,
    not a regular file, no permission: noted, since the file is there)."""
    text = host.read_text(path)
    if text is None and host.exists(path):
        note(
            f"{path} is there but unreadable (binary, not a regular file, no permission)", "warning"
        )
    return None if text is None else text.strip() or None


def read_int(host: Host, path: str, base: int = 0) -> Optional[int]:
    """An integer file (``0x10de``, ``1``), or None when missing or not a number."""
    value = read_value(host, path)
    if value is None:
        return None
    try:
        return int(value, base)
    except ValueError:
        note(f"{path} holds {value[:40]!r}, not a number", "warning")
        return None


class PciDevice(NamedTuple):
    """A PCI function as sysfs shows it, with the facts device plugins need."""

    bus_id: str
    vendor: int
    device: int
    class_code: Optional[int]
    driver: Optional[str]
    numa_node: Optional[int]
    path: str


PCI_FUNCTIONS = "/sys/bus/pci/devices"
PCI_LISTING = "/proc/bus/pci/devices"


def pci_devices(host: Host, vendor: int, directory: str = PCI_FUNCTIONS) -> list[PciDevice]:
    """PCI functions of ``vendor`` under ``directory`` in bus order; ``numa_node`` -1 is None.

    sysfs takes a file read per function to tell its vendor, and a server has hundreds of them
    (bridges, switches, NICs, NVMe): 10 ms and more on every detection, for the families that
    look for their devices on the bus. So, for the machine's own ``/sys/bus/pci/devices``, the
    kernel's one-file listing of every function with its vendor, ``/proc/bus/pci/devices``, is
    read first: when it lists none of ``vendor``, there are none. Where it is missing, empty or
    not in the format known, every function is read as before.
    """
    listed = listed_vendors(host) if directory == PCI_FUNCTIONS else None
    if listed is not None and vendor not in listed:
        return []
    found: list[PciDevice] = []
    for name in host.listdir(directory):
        path = posixpath.join(directory, name)
        if read_int(host, f"{path}/vendor", 16) != vendor:
            continue
        found.append(pci_device_at(host, path, name))
    return sorted(found, key=lambda d: d.bus_id)


def listed_vendors(host: Host) -> Optional[set[int]]:
    """The vendors of the functions ``/proc/bus/pci/devices`` lists (a line per function, its
    second field the vendor and device ids in hex, ``10de2330``); None where it cannot say."""
    text = host.read_text(PCI_LISTING)
    if not text or not text.endswith("\n") or len(text) >= MAX_READ_BYTES:
        return None  # missing, empty, or cut at the read limit: the rest might hold the vendor
    vendors: set[int] = set()
    for line in text.splitlines():
        fields = line.split("\t")
        if len(fields) < 2 or not re.fullmatch(r"[0-9a-fA-F]{8}", fields[1]):
            return None
        vendors.add(int(fields[1][:4], 16))
    return vendors


def pci_device_at(host: Host, path: str, bus_id: Optional[str] = None) -> PciDevice:
    """The PCI facts of the device directory ``path`` (e.g. ``/sys/class/drm/card0/device``)."""
    real = host.realpath(path) or path
    driver = host.readlink(f"{path}/driver")
    numa = read_int(host, f"{path}/numa_node", 10)
    return PciDevice(
        bus_id=(bus_id or posixpath.basename(real)).lower(),
        vendor=read_int(host, f"{path}/vendor", 16) or 0,
        device=read_int(host, f"{path}/device", 16) or 0,
        class_code=read_int(host, f"{path}/class", 16),
        driver=posixpath.basename(driver) if driver else None,
        numa_node=numa if numa is not None and numa >= 0 else None,
        path=real,
    )
