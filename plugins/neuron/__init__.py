"""AWS Neuron (Trainium, Inferentia): NeuronCores are the schedulable unit, not the devices.

A process reserves cores with ``NEURON_RT_VISIBLE_CORES``, which the runtime documents as one
core ("3") or one inclusive range ("2-5"); a reserved core is never shared, so requests are whole
cores and a grant is a contiguous range. Core ids are logical: on Trainium2 and later the runtime
groups ``NEURON_LOGICAL_NC_CONFIG`` physical cores (default 2) into one, and numbers the groups
across the node's devices in device order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Optional

from accelkit import (
    CONTIGUOUS,
    AcceleratorManager,
    Device,
    Frameworks,
    Host,
    Scheduling,
    hookimpl,
    note,
)
from accelkit.detect import (
    MAX_DEVICES,
    detect_layers,
    device_count,
    first_records,
    numbered_files,
    parse_int,
    read_int,
    read_value,
)

from .ranges import format_ranges, parse_ranges

VISIBLE = "NEURON_RT_VISIBLE_CORES"
NUM_CORES = "NEURON_RT_NUM_CORES"  # any N free cores instead of named ones: unset on a grant
LNC = "NEURON_LOGICAL_NC_CONFIG"
GROUPED = ("Trainium2", "Trainium3")  # device names whose runtime groups 2 cores by default
TYPE_LABEL = "aws-neuron-core"
SYSFS = "/sys/devices/virtual/neuron_device"
# Newer flag first (Neuron 2.34 removed --json-output); an older neuron-ls rejects it. Both list
# devices with neuron_device, nc_count, bdf and memory_size (bytes). nc_count is already logical
# (a trn2.48xlarge at LNC=2 lists 16 devices of 4): only sysfs counts physical cores.
COMMANDS = (("neuron-ls", "--output-format", "json"), ("neuron-ls", "--json-output"))
FIELDS = ("neuron_device", "nc_count", "memory_size")
SCHEDULING = Scheduling(
    placement=CONTIGUOUS,
    partitions_per_grant=None,  # cores name their device in ``parent``, yet are ordinary units
)
# Trn1's collectives accept 1, 2, 8, 16 or a multiple of 32 cores (Neuron's Trn1 notes): on a
# node of Trainium1 devices those are the quantities a request may take.
TRN1, TRN1_CORES, TRN1_GROUP = "Trainium1", (1, 2, 8, 16), 32


class NeuronManager(AcceleratorManager):
    """AWS Neuron logical cores, granted whole as one contiguous range."""

    name = "neuron"
    resource_name = "neuron_cores"
    api_version = 2
    visible_devices_env_var = VISIBLE
    env_vars_read = (VISIBLE, NUM_CORES, LNC)
    fractional = False
    scheduling = SCHEDULING
    frameworks = Frameworks(device="xla", collective="xla", platform="neuron")

    def read_visible(self, env: Mapping[str, str]) -> Optional[list[str]]:
        """``NEURON_RT_VISIBLE_CORES`` as the runtime reads it: single cores and ranges."""
        return parse_ranges(env[VISIBLE]) if VISIBLE in env else None

    def visibility_env(
        self, ids: Sequence[str], *, total: Optional[int] = None
    ) -> dict[str, Optional[str]]:
        """One core or one range; ``NEURON_RT_NUM_CORES`` unset so it cannot ask for more."""
        value = format_ranges(ids)
        if "," in value:
            raise ValueError(
                f"NeuronCores {value}: {VISIBLE} takes one core (3) or one range (2-5)"
            )
        return {VISIBLE: value, NUM_CORES: None}

    def detect(self, host: Host) -> list[Device]:
        """neuron-ls's JSON, else the driver's sysfs devices; the quantities their generation's
        collectives accept become this manager's ``scheduling`` (see :func:`_scheduling`)."""
        layers = (("command", self._from_neuron_ls), ("sysfs", self._from_sysfs))
        devices = detect_layers(host, *layers)
        self.scheduling = _scheduling(devices)
        return devices

    def _from_neuron_ls(self, host: Host) -> Optional[list[Device]]:
        """The cores of every device neuron-ls lists (either spelling of its JSON flag)."""
        entries = first_records(host, *COMMANDS)
        chips = None if entries is None else [_chip(n, e) for n, e in enumerate(entries)]
        return None if chips is None else self._cores(host, chips, logical=True)

    def _from_sysfs(self, host: Host) -> Optional[list[Device]]:
        """The cores of every ``neuron<N>`` device directory."""
        chips = [_Chip(number) for number, _path in numbered_files(host, f"{SYSFS}/neuron")]
        return self._cores(host, chips) if chips else None

    def _cores(self, host: Host, chips: Sequence[_Chip], logical: bool = False) -> list[Device]:
        """Logical cores of every device, numbered across devices in device order.

        ``logical``: the chips' core counts are logical already (neuron-ls); otherwise (a count
        missing there, or sysfs) physical cores are read and grouped by the LNC factor.
        """
        devices: list[Device] = []
        for chip in sorted(chips, key=lambda c: c.number):
            base = f"{SYSFS}/neuron{chip.number}"
            model = read_value(host, f"{base}/info/architecture/device_name")
            if logical and chip.cores is not None:
                count = chip.cores
            else:
                count = _logical_cores(host, base, chip.number, _lnc(host.env, model))
            count = device_count(len(devices) + count, "Neuron cores") - len(devices)
            share = max(chip.memory or 0, 0) // max(count, 1) or None  # of the device's memory
            core = Device(
                "0",
                type_label=TYPE_LABEL,
                model=model,
                memory_bytes=share,
                pci_bus_id=chip.bus_id,  # detection normalises it and adds the NUMA node
                parent=f"neuron{chip.number}",
            )
            devices += [core.replace(id=str(len(devices) + n)) for n in range(count)]
        return devices

    def labels(self, devices: Sequence[Device], host: Host) -> dict[str, str]:
        """The device generation ("Trainium1"), device count and logical core grouping."""
        model = next((d.model for d in devices if d.model), None)
        count, lnc = len({d.parent for d in devices}), _lnc(host.env, model)
        labels = {"devices": str(count), "lnc": str(lnc)} if devices else {}
        return {**labels, "model": model} if model else labels


class _Chip(NamedTuple):
    """One Neuron device as a layer sees it; what the layer lacks is read from sysfs."""

    number: int
    cores: Optional[int] = None
    bus_id: Optional[str] = None
    memory: Optional[int] = None


def _scheduling(devices: Sequence[Device]) -> Scheduling:
    """Trn1's quantities on a node of Trainium1 devices (multiples of 32 up to the cores it
    has, at least 32), else any whole count.

    Set on the manager by ``detect()``: node detection takes each family's policy from its
    manager right after detecting (``Node.families`` in the node's JSON), so the node carries
    the rule of the generation it found, and an allocator over that JSON applies it with no
    plugin loaded. Node detection works on its own copy of each manager, so nodes detected at
    once, or in turn, each get their own rule; the class declaration stays any whole count.
    """
    if not any(device.model == TRN1 for device in devices):
        return SCHEDULING
    most = min(max(len(devices), TRN1_GROUP), MAX_DEVICES)  # a trn1.32xlarge has 32 cores
    groups = range(TRN1_GROUP, most + 1, TRN1_GROUP)
    return Scheduling(
        allowed_quantities=(*TRN1_CORES, *groups), placement=CONTIGUOUS, partitions_per_grant=None
    )


def _chip(position: int, entry: Mapping[str, Any]) -> _Chip:
    """One neuron-ls device record; its place in the list stands in for a missing number."""
    number, cores, memory = (parse_int(entry.get(field)) for field in FIELDS)
    bus = entry.get("bdf")
    return _Chip(position if number is None else number, cores, str(bus) if bus else None, memory)


def _logical_cores(host: Host, base: str, number: int, lnc: int) -> int:
    """A device's logical cores from the driver's physical count (``core_count``, else its
    ``neuron_core<N>`` directories) grouped by ``lnc``; a count that does not divide is noted."""
    physical = read_int(host, f"{base}/core_count", 10)
    if physical is None:
        physical = len(host.glob(f"{base}/neuron_core[0-9]*"))
    if physical <= 0 or physical % lnc:
        note(f"neuron{number} has {physical} cores, grouped by {lnc}", "warning")
    return max(physical, 0) // lnc


def _lnc(env: Mapping[str, str], model: Optional[str]) -> int:
    """Physical cores per logical core: the variable when valid, else the generation's default.

    AWS: "LNC can only be set to 1 or 2 ... LNC applies only to Trn2 and Trn3 instances"
    (logical-neuroncore-config): on Trainium1 and Inferentia2 every core stays a core of its own
    whatever the variable says, and another value is refused. A device whose generation is
    unknown takes the variable (1 or 2), else 1."""
    raw = env.get(LNC, "").strip()
    if model is not None and model not in GROUPED:
        if raw and raw != "1":
            note(f"{LNC}={raw!r} applies only to Trainium2 and later; {model} cores stay single")
        return 1
    if raw in ("1", "2"):
        return int(raw)
    default = 1 if model is None else 2
    if raw:
        note(f"{LNC}={raw!r} is not 1 or 2, the runtime's values; using {default}", "warning")
    return default


@hookimpl
def accelkit_register_managers() -> list[AcceleratorManager]:
    """The plugin's one manager, for every scheduler that loads accelkit."""
    return [NeuronManager()]
