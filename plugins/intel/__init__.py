"""Intel GPUs (Level Zero): ``ONEAPI_DEVICE_SELECTOR=level_zero:<ids>``, stacks as root devices.

Ids are the root-device ordinals ``ONEAPI_DEVICE_SELECTOR`` takes under the effective
``ZE_FLAT_DEVICE_HIERARCHY``: in FLAT mode (the default) each stack of a card is a root device of
its own (a Max 1550 is two, a Max 1100 one); in COMBINED mode Level Zero shows cards but SYCL
still numbers stacks as root devices, so ids are numbered as in FLAT; in COMPOSITE mode a card is
one. A stack is not a partition of an allocatable card, so it has no ``parent``; its card is its
``pci_bus_id``.

Ids count in PCI order in every layer: a grant writes ``ZE_ENABLE_PCI_ID_DEVICE_ORDER=1`` (Level
Zero's own order is the driver's otherwise) and the dpctl probe runs with it. ``ZE_AFFINITY_MASK``
applies first and the SYCL selector's indices are read relative to its list, so a grant writes
the selector and unsets the mask; hiding every device writes ``!level_zero:*;!opencl:gpu`` (a
Level Zero discard alone leaves the OpenCL GPUs visible). How the variables are read, discard
terms included: ``variables``.

Integrated GPUs share the vendor id 0x8086 and take a Level Zero ordinal too, so they are
counted but never offered (``Device.offered`` False). The rule: on PCI layers (xpu-smi, sysfs)
an integrated GPU is the function at 0000:00:02.0, where Intel has always put it; dpctl gives no
bus id, so there a GPU is discrete when its name is a discrete product ("Data Center GPU ...",
"Arc ... A770").

Detection: dpctl in a probe process (with the node's visibility variables lifted, so it names
every device; the core applies them to the node), else ``xpu-smi discovery -j`` (cards sorted by
bus id), else DRM cards bound to i915 or xe, in bus order.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Callable, Optional

from accelkit import AcceleratorManager, Device, Frameworks, Host, hookimpl, note
from accelkit.detect import (
    call_probe,
    detect_layers,
    drm_devices,
    find_field,
    first_records,
    join_ids,
    normalise_bus_id,
    parse_int,
    type_label,
)

from .variables import STACKS_ARE_ROOTS, hierarchy, visible_root_devices

PRODUCTS = {  # product -> PCI device ids, for layers that name a card only by its id
    "Max 1550": (0x0BD5, 0x0BD6),
    "Max 1450": (0x0BD1, 0x0B69),
    "Max 1350": (0x0BD7, 0x0BD8),
    "Max 1100": (0x0BD9, 0x0BDA, 0x0BDB),
    "Flex 170": (0x56C0,),
    "Flex 140": (0x56C1,),
    "Arc A770": (0x56A0,),
    "Arc A750": (0x56A1,),
    "Arc B580": (0xE20B,),  # Battlemage, on the xe driver (other Battlemage ids: not confirmed)
}
MODELS = {pci: product for product, ids in PRODUCTS.items() for pci in ids}
# Discrete products -> labels; a name matching neither is not a discrete GPU (for dpctl).
TYPE_LABELS = (
    (r"\b(Max|Flex) (\d+)\b", r"Intel-GPU-\1-\2"),
    (r"\bArc\W+(?:TM\W+)?((?:Pro )?[AB]\d+\w*)", r"Intel-Arc-\1"),
)
DISCRETE = "(?i)" + "|".join(pattern for pattern, _ in TYPE_LABELS)
STACKS = {"Intel-GPU-Max-1550": 2, "Intel-GPU-Max-1450": 2, "Intel-GPU-Max-1350": 2}
INTEGRATED_BUS = "0000:00:02.0"
XPU_SMI = ("xpu-smi", "discovery", "-j")
PCI_ORDER = {"ZE_ENABLE_PCI_ID_DEVICE_ORDER": "1"}
PROBE_ENV = {**PCI_ORDER, "ONEAPI_DEVICE_SELECTOR": None, "ZE_AFFINITY_MASK": None}


class IntelManager(AcceleratorManager):
    name = "intel"
    resource_name = "GPU"
    api_version = 2
    visible_devices_env_var = "ONEAPI_DEVICE_SELECTOR"
    env_vars_read = (
        "ONEAPI_DEVICE_SELECTOR",
        "ZE_AFFINITY_MASK",
        "ZE_FLAT_DEVICE_HIERARCHY",
        "ZE_ENABLE_PCI_ID_DEVICE_ORDER",
    )
    frameworks = Frameworks(
        device="xpu",
        collective="xccl",  # PyTorch's own XPU backend (oneCCL); IPEX's older one is "ccl"
        shared_visibility=True,
    )

    root_devices: Optional[int] = None
    """How many root devices Level Zero counts here, integrated GPUs included: kept by
    ``detect()``, since a selector that only discards leaves all the others."""

    def read_visible(self, env: Mapping[str, str]) -> Optional[list[str]]:
        """``ZE_AFFINITY_MASK`` first, then ``ONEAPI_DEVICE_SELECTOR``'s ids relative to it,
        less what the selector discards (``variables``)."""
        return visible_root_devices(env, self.root_devices)

    def visibility_env(
        self, ids: Sequence[str], *, total: Optional[int] = None
    ) -> dict[str, Optional[str]]:
        """The selector in PCI order; an empty device list is not a selector SYCL parses, so
        hiding all discards Level Zero and OpenCL GPUs."""
        selector = f"level_zero:{join_ids(ids)}" if ids else "!level_zero:*;!opencl:gpu"
        return {"ONEAPI_DEVICE_SELECTOR": selector, "ZE_AFFINITY_MASK": None, **PCI_ORDER}

    def detect(self, host: Host) -> list[Device]:
        """dpctl in a probe process, else xpu-smi's JSON, else discrete DRM cards."""
        layers = (("library", from_dpctl), ("command", from_xpu_smi), ("sysfs", from_drm))
        devices = detect_layers(host, *layers)
        self.root_devices = len(devices)
        return devices


def card(
    host: Host, name: Any, pci: Any, bus: Any, uuid: Any = None, memory: Any = None
) -> list[Device]:
    """A card's root devices, unnumbered. A layer that lists PCI functions (bus id known) lists
    cards: in FLAT mode each is split into its stacks. dpctl lists root devices as they are. An
    integrated GPU is one device, not ``offered``: Level Zero counts it (it takes an ordinal, and
    a visibility list naming it reads on past it)."""
    known, bus_id = MODELS.get(parse_int(pci) or 0), normalise_bus_id(bus)
    model = str(name) if known is None or re.search(DISCRETE, str(name)) else known
    if bus_id == INTEGRATED_BUS or (bus_id is None and not re.search(DISCRETE, model)):
        note(f"{model} ({bus_id or 'no bus id'}) is an integrated GPU: counted, not offered")
        return [Device("0", model=model, pci_bus_id=bus_id, offered=False)]
    label = type_label(model, TYPE_LABELS, ("Graphics",), "Intel")
    roots = hierarchy(host.env) in STACKS_ARE_ROOTS
    stacks = STACKS.get(label or "", 1) if bus_id and roots else 1
    uuid = str(uuid) if uuid and stacks == 1 else None  # a card's UUID names none of its stacks
    facts = {"model": model, "uuid": uuid, "memory_bytes": parse_int(memory), "pci_bus_id": bus_id}
    return [Device("0", type_label=label, **facts)] * stacks


def numbered(cards: Iterable[list[Device]]) -> list[Device]:
    """Root devices numbered in Level Zero order, which counts integrated GPUs too."""
    roots = [device for card_roots in cards for device in card_roots]
    return [d.replace(id=str(n), index=n) for n, d in enumerate(roots)]


def dpctl_probe(import_module: Callable[[str], Any]) -> list[list[Any]]:
    """In the probe process: name and memory of each Level Zero GPU root device, in order."""
    devices = import_module("dpctl").get_devices(backend="level_zero", device_type="gpu")
    return [[device.name, device.global_mem_size] for device in devices]


def from_dpctl(host: Host) -> Optional[list[Device]]:
    """Root devices as SYCL sees them, in the node's hierarchy mode and in PCI order. The probe
    runs with the node's visibility variables lifted, so it names every device."""
    found = call_probe(host, dpctl_probe, expect=list, env=PROBE_ENV, library="dpctl")
    cards = (card(host, name, None, None, None, size) for name, size in found or ())
    return None if found is None else numbered(cards)


def from_xpu_smi(host: Host) -> Optional[list[Device]]:
    """One record per card; old releases name every card "Intel(R) Graphics [0x0bd5]".
    Cards are numbered in bus order, so a card without a bus id fails the layer: its place
    among the others, and its stacks, are unknown."""
    records = first_records(host, XPU_SMI)
    fields = ("device_name", "pci_device_id", "pci_bdf_address", "uuid")
    found = [[find_field(record, f) for f in fields] for record in records or ()]
    for name, _pci, bus, _uuid in found:
        if normalise_bus_id(bus) is None:
            raise ValueError(f"xpu-smi lists {name} with bus id {bus!r}: its place is unknown")
    found.sort(key=lambda facts: normalise_bus_id(facts[2]) or "")
    return None if records is None else numbered(card(host, *facts) for facts in found)


def from_drm(host: Host) -> Optional[list[Device]]:
    """DRM cards of vendor 0x8086 bound to i915 or xe, in bus order."""
    found = drm_devices(host, 0x8086)
    gpus = [d for d in found or () if d.driver in ("i915", "xe")]
    cards = (card(host, f"GPU {d.device:#06x}", d.device, d.bus_id) for d in gpus)
    return None if found is None else numbered(cards)


@hookimpl
def accelkit_register_managers() -> list[AcceleratorManager]:
    """The plugin's one manager, for every scheduler that loads accelkit."""
    return [IntelManager()]
