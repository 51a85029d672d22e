"""Intel GPUs (Level Zero): ``ONEAPI_DEVICE_SELECTOR=level_zero:<ids>``, stacks as root devices.

Ids are Level Zero root-device ordinals under the effective ``ZE_FLAT_DEVICE_HIERARCHY``: in
FLAT mode (the default) each stack of a card is a root device of its own (a Max 1550 is two, a
Max 1100 one); in COMPOSITE or COMBINED mode a card is one. A stack is not a partition of an
allocatable card, so it has no ``parent``; its card is its ``pci_bus_id``.

``ZE_AFFINITY_MASK`` applies first and the SYCL selector's indices are read relative to its
list, so a grant writes the selector and unsets the mask. Reading accepts bare lists (``0,1``)
and selector terms (``level_zero:0,1;opencl:*``; ``*`` or ``gpu`` select all).

Integrated GPUs share the vendor id 0x8086 and take a Level Zero ordinal too, so they are
counted but never offered. The rule: on PCI layers (xpu-smi, sysfs) an integrated GPU is the
function at 0000:00:02.0, where Intel has always put it; dpctl gives no bus id, so there a GPU
is discrete when its name is a discrete product ("Data Center GPU ...", "Arc ... A770").

Detection: dpctl in a probe process (skipped when a visibility variable is set on the node, as
dpctl would see only the selected devices), else ``xpu-smi discovery -j``, else DRM cards bound
to i915 or xe, in bus order (Level Zero's order).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Callable, Optional

from accelkit import AcceleratorManager, Device, Host, hookimpl, note
from accelkit.detection import call_probe, detect_layers, parse_json, run_command
from accelkit.gpu_facts import find_field, json_records, normalise_bus_id, parse_int, type_label
from accelkit.gpu_sysfs import drm_devices, pci_location
from accelkit.visibility import join_ids, relative_ids, split_ids

# fmt: off
MODELS = {  # PCI device id -> product, for layers that give only the id
    0x0BD5: "Max 1550", 0x0BD6: "Max 1550", 0x0BD1: "Max 1450", 0x0B69: "Max 1450",
    0x0BD7: "Max 1350", 0x0BD8: "Max 1350", 0x0BD9: "Max 1100", 0x0BDA: "Max 1100",
    0x0BDB: "Max 1100", 0x56C0: "Flex 170", 0x56C1: "Flex 140", 0x56A0: "Arc A770",
    0x56A1: "Arc A750",
}
# fmt: on
# Discrete products -> labels; a name matching neither is not a discrete GPU (for dpctl).
TYPE_LABELS = (
    (r"\b(Max|Flex) (\d+)\b", r"Intel-GPU-\1-\2"),
    (r"\bArc\W+(?:TM\W+)?((?:Pro )?[AB]\d+\w*)", r"Intel-Arc-\1"),
)
DISCRETE = re.compile("|".join(pattern for pattern, _ in TYPE_LABELS), re.IGNORECASE)
STACKS = {"Intel-GPU-Max-1550": 2, "Intel-GPU-Max-1450": 2, "Intel-GPU-Max-1350": 2}
INTEGRATED_BUS = "0000:00:02.0"
XPU_SMI = ("xpu-smi", "discovery", "-j")


class IntelManager(AcceleratorManager):
    name = "intel"
    resource_name = "GPU"
    visible_devices_env_var = "ONEAPI_DEVICE_SELECTOR"
    env_vars_read = ("ONEAPI_DEVICE_SELECTOR", "ZE_AFFINITY_MASK", "ZE_FLAT_DEVICE_HIERARCHY")
    framework_device = "xpu"
    collective_backend = "xccl"  # PyTorch's own XPU backend (oneCCL); IPEX's older one is "ccl"

    def read_visible(self, env: Mapping[str, str]) -> Optional[list[str]]:
        mask = split_ids(env.get("ZE_AFFINITY_MASK"), self.nothing_visible)
        selected = level_zero_ids(env.get("ONEAPI_DEVICE_SELECTOR"), self.nothing_visible)
        if mask is None or selected is None:
            return selected if mask is None else mask
        return relative_ids(mask, selected)

    def visibility_env(self, ids: Sequence[str]) -> dict[str, Optional[str]]:
        return {"ONEAPI_DEVICE_SELECTOR": f"level_zero:{join_ids(ids)}", "ZE_AFFINITY_MASK": None}

    def detect(self, host: Host) -> list[Device]:
        layers = (("library", from_dpctl), ("command", from_xpu_smi), ("sysfs", from_drm))
        return detect_layers(host, *layers)


def level_zero_ids(value: Optional[str], nothing: Sequence[str]) -> Optional[list[str]]:
    """Level Zero tokens a selector keeps: None for all, [] when its terms name other backends.

    Exclusion terms (``!level_zero:1``) are not modelled: they select nothing here.
    """
    if value is None or value.strip() in nothing:
        return None if value is None else []
    ids: list[str] = []
    for term in value.split(";"):
        backend, _, tokens = term.strip().rpartition(":")
        if backend.strip().lower() in ("", "*", "level_zero"):
            ids += split_ids(tokens, ()) or []
    return None if {"*", "gpu"} & set(ids) else ids


def card(host: Host, name: Any, pci: Any, uuid: Any, bus: Any, memory: Any, split: bool = True
         ) -> list[Optional[Device]]:  # fmt: skip
    """A card's root devices, unnumbered: one per stack when ``split`` in FLAT mode. An
    integrated GPU is ``[None]``: it is not offered, yet it takes a Level Zero ordinal."""
    known, bus_id = MODELS.get(parse_int(pci) or 0), normalise_bus_id(bus)
    model = str(name) if known is None or DISCRETE.search(str(name)) else known
    if bus_id == INTEGRATED_BUS or (bus_id is None and not DISCRETE.search(model)):
        note(f"{model} ({bus_id or 'no bus id'}) is an integrated GPU: counted, not offered")
        return [None]
    label = type_label(model, TYPE_LABELS, ("Graphics",), "Intel")
    flat = host.env.get("ZE_FLAT_DEVICE_HIERARCHY", "FLAT").strip().upper() == "FLAT"
    stacks = STACKS.get(label or "", 1) if split and flat else 1
    size = parse_int(memory) or 0
    return [Device("0", type_label=label, model=model, memory_bytes=size // stacks or None,
                   uuid=str(uuid) if uuid and stacks == 1 else None,  # a card's UUID names no stack
                   **pci_location(host, bus_id))] * stacks  # fmt: skip


def numbered(cards: Iterable[list[Optional[Device]]]) -> list[Device]:
    """Root devices numbered in Level Zero order, which counts integrated GPUs too."""
    roots = [device for card_roots in cards for device in card_roots]
    return [d.replace(id=str(n), index=n) for n, d in enumerate(roots) if d is not None]


def dpctl_probe(import_module: Callable[[str], Any]) -> list[list[Any]]:
    """In the probe process: name and memory of each Level Zero GPU root device, in order."""
    devices = import_module("dpctl").get_devices(backend="level_zero", device_type="gpu")
    return [[device.name, device.global_mem_size] for device in devices]


def from_dpctl(host: Host) -> Optional[list[Device]]:
    """Root devices as SYCL sees them, in the node's hierarchy mode; stacks are not split again."""
    if {"ZE_AFFINITY_MASK", "ONEAPI_DEVICE_SELECTOR"} & set(host.env):
        note("dpctl would see only the devices the node's visibility variables select: skipped")
        return None
    found = call_probe(host, dpctl_probe)
    if not isinstance(found, list):
        return None
    return numbered(card(host, name, None, None, None, memory, False) for name, memory in found)


def from_xpu_smi(host: Host) -> Optional[list[Device]]:
    """One record per card; old releases name every card "Intel(R) Graphics [0x0bd5]"."""
    records = json_records(parse_json(run_command(host, XPU_SMI), "xpu-smi discovery output"))
    if records is None:
        return None
    fields = ("device_name", "pci_device_id", "uuid", "pci_bdf_address")
    cards = []
    for record in records:
        name, pci, uuid, bus = (find_field(record, field) for field in fields)
        cards.append(card(host, name, pci, uuid, bus, None))
    return numbered(cards)


def from_drm(host: Host) -> Optional[list[Device]]:
    """DRM cards of vendor 0x8086 bound to i915 or xe, in bus order."""
    found = drm_devices(host, 0x8086)
    if found is None:
        return None
    gpus = [d for d in found if d.driver in ("i915", "xe")]
    return numbered(
        card(host, f"GPU {d.device:#06x}", d.device, None, d.bus_id, None) for d in gpus
    )


@hookimpl
def accelkit_register_managers() -> list[AcceleratorManager]:
    return [IntelManager()]
