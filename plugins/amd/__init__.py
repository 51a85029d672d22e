"""AMD Instinct GPUs (ROCm): ``ROCR_VISIBLE_DEVICES`` ids, HIP's variables read relative to it.

ROCr applies ``ROCR_VISIBLE_DEVICES`` (indices or ``GPU-<unique id>`` UUIDs) first; HIP then
applies ``HIP_VISIBLE_DEVICES``, or ``CUDA_VISIBLE_DEVICES`` when HIP's is unset or empty, as
indices *into ROCr's list*, each read as ROCm's sources do (``rocm_visible``; a value ROCr
refuses, with an empty token, is ``ValueError``: nothing visible). A grant writes ROCr's ids and
``HIP_VISIBLE_DEVICES=0,...,n-1`` (so a stale CUDA value cannot re-map them), and unsets
``CUDA_VISIBLE_DEVICES`` unless another family on the node owns it (the core never lets a family
write another's variable). A grant of nothing writes ``ROCR_VISIBLE_DEVICES=""`` and unsets
HIP's.

Detection: amdsmi, else ``amd-smi list``/``static`` JSON (field names move between ROCm
releases, so they are looked up leniently), else the KFD topology (partitions of a card in
CPX/TPX mode are nodes of their own), else DRM cards deduplicated by bus id. Whichever layer
answers, ids are renumbered in KFD order by bus id, because that is the order ROCr counts in.
The type label comes from the PCI device id, offline (a virtual function's is its product's);
an unknown id keeps the market name, and without one it is ``AMD-GPU-<device id in hex>``
(``AMD-GPU-640f``). A card split into compute partitions (DPX, QPX, CPX) is several GPUs, each
with its own id, memory and UUID, labelled with the mode, all on the card's PCI bus id
(``partitions``). A Ryzen integrated GPU
that ROCm does not support is counted in ROCr's numbering but never offered (``Device.offered``
False: a ``ROCR_VISIBLE_DEVICES`` naming it reads on past it).
Frameworks name the device ``cuda`` and the collective backend ``nccl`` on ROCm too (PyTorch's
``nccl`` backend runs RCCL there).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

from accelkit import AcceleratorManager, Device, Frameworks, Host, hookimpl, note
from accelkit.detect import (
    detect_layers,
    drm_devices,
    find_field,
    first_records,
    json_records,
    library_session,
    normalise_bus_id,
    parse_int,
    parse_json,
    parse_memory,
    read_int,
    run_command,
    sanitize_label,
)

from .kfd import in_rocr_order, kfd_bus_id, kfd_gpu_nodes
from .partitions import with_partitions
from .rocm_visible import names_uuid, rocm_visible

PRODUCTS = {  # PCI device id -> type label (the id is the one fact every layer, sysfs too, gives)
    0x66A1: "AMD-Instinct-MI50",
    0x738C: "AMD-Instinct-MI100",
    0x7408: "AMD-Instinct-MI250X",
    0x740C: "AMD-Instinct-MI250X-MI250",
    0x740F: "AMD-Instinct-MI210",
    0x74A0: "AMD-Instinct-MI300A",
    0x74A1: "AMD-Instinct-MI300X-OAM",
    0x74A2: "AMD-Instinct-MI308X-OAM",
    0x74A5: "AMD-Instinct-MI325X-OAM",
    0x74A9: "AMD-Instinct-MI300X-HF",
    0x75A0: "AMD-Instinct-MI350X-OAM",
    0x75A3: "AMD-Instinct-MI355X-OAM",
    # Virtual functions (SR-IOV guests: cloud VMs) are labelled as the product they are part of.
    0x74B5: "AMD-Instinct-MI300X-OAM",  # pci.ids: "Instinct MI300X VF"
    0x74B9: "AMD-Instinct-MI325X-OAM",  # "Instinct MI325X VF"
    0x74BD: "AMD-Instinct-MI300X-HF",  # "Instinct MI300X HF", the VF id beside 0x74B5/0x74B9
}
# Ryzen integrated GPUs ROCm does not support: ROCr still counts them (they take an ordinal),
# and work sent to one faults, so they are never offered. Other Ryzen iGPUs' ids are not
# confirmed here; an unknown one keeps its market-name label and is offered.
INTEGRATED = {0x164E: "AMD-Radeon-Raphael-iGPU"}  # Ryzen 7000 (gfx1036)
LABELS = {**PRODUCTS, **INTEGRATED}
NO_DRIVER = ("AMDSMI_STATUS_DRIVER_NOT_LOADED",)  # amdsmi_init without amdgpu: an absent stack
AMD_VENDOR = 0x1002
AMD_SMI_LIST = ("amd-smi", "list", "--json")
AMD_SMI_STATIC = ("amd-smi", "static", "--asic", "--vram", "--json")


class AmdManager(AcceleratorManager):
    """AMD GPUs as ROCr numbers them; HIP and CUDA variables read relative to ROCr's list."""

    name = "amd"
    resource_name = "GPU"
    api_version = 2
    visible_devices_env_var = "ROCR_VISIBLE_DEVICES"
    env_vars_read = ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
    frameworks = Frameworks(
        device="cuda",  # PyTorch on ROCm keeps CUDA's device name
        collective="nccl",  # RCCL answers to it
        memory_hints=True,  # JAX and TensorFlow on CUDA/ROCm read them
        shared_visibility=True,
    )

    def read_visible(self, env: Mapping[str, str]) -> Optional[list[str]]:
        """``ROCR_VISIBLE_DEVICES``, then HIP's (or CUDA's) positions within ROCr's list, read as
        ROCm's sources do (``rocm_visible``); ``ValueError`` for a value ROCr refuses."""
        return rocm_visible(env)

    def matches(self, token: str, device: Device) -> bool:
        """An index names the GPU ROCr numbers so; a ``GPU-`` token is a prefix of its UUID."""
        if token.startswith("GPU-"):
            return token == device.id or names_uuid(token, device.uuid)
        return super().matches(token, device)

    def visibility_env(
        self, ids: Sequence[str], *, total: Optional[int] = None
    ) -> dict[str, Optional[str]]:
        """ROCr's ids, HIP's positions in them, CUDA's variable unset (see the module)."""
        rocr = super().visibility_env(ids, total=total)
        hip = ",".join(str(n) for n in range(len(ids))) if ids else None  # nothing: HIP unset
        return {**rocr, "HIP_VISIBLE_DEVICES": hip, "CUDA_VISIBLE_DEVICES": None}

    def detect(self, host: Host) -> list[Device]:
        """amdsmi, else amd-smi's JSON, else the KFD topology, else DRM cards; in ROCr's order,
        compute partitions with their own facts (``partitions``), integrated GPUs ROCm does not
        support returned not ``offered``."""
        layers = (("library", from_amdsmi), ("command", from_amd_smi), ("sysfs", from_kfd))
        found = in_rocr_order(host, detect_layers(host, *layers, ("sysfs", from_drm)))
        return [as_supported(d) for d in with_partitions(host, found)]


def as_supported(device: Device) -> Device:
    """The GPU, not ``offered`` when it is an integrated GPU ROCm does not support: ROCr still
    counts it, so it keeps its ordinal (the others keep theirs) and a ``ROCR_VISIBLE_DEVICES``
    naming it reads on past it."""
    if device.type_label not in INTEGRATED.values():
        return device
    note(f"GPU {device.id} ({device.type_label}) is an integrated GPU ROCm does not support")
    return device.replace(offered=False)


def gpu(host: Host, index: int, facts: Any, bus: object, memory: Optional[int] = None) -> Device:
    """A GPU from a layer's facts: PCI device id, market name, serial (ROCr's UUID is ``GPU-`` and
    its 16 hex digits; tools print it in hex, with or without ``0x``, KFD gives an int). The
    device id and VRAM size a layer lacks are read offline from the GPU's sysfs."""
    pci = f"/sys/bus/pci/devices/{normalise_bus_id(bus)}"
    device_id = parse_int(find_field(facts, "device_id")) or read_int(host, f"{pci}/device", 16)
    market, serial = find_field(facts, "market_name"), find_field(facts, "asic_serial", "unique_id")
    model = market if isinstance(market, str) and market not in ("", "N/A") else None
    uuid = f"GPU-{n:016x}" if (n := parse_int(serial, 16)) else None
    label = LABELS.get(device_id or 0) or sanitize_label(
        model or (f"GPU-{device_id:04x}" if device_id else None), prefix="AMD"
    )
    memory = memory or read_int(host, f"{pci}/mem_info_vram_total", 10)
    facts = {"model": model, "uuid": uuid, "memory_bytes": memory, "pci_bus_id": str(bus)}
    return Device(str(index), index, type_label=label, **facts)


def vram_mib(size: Any) -> Optional[int]:
    """VRAM in bytes from amdsmi/amd-smi, which give MiB (written "MB") in several shapes."""
    text = f"{size.get('value')} {size.get('unit')}" if isinstance(size, Mapping) else str(size)
    return parse_memory(text.replace("MB", "MiB"), "MiB")


def from_amdsmi(host: Host) -> Optional[list[Device]]:
    """One GPU per amdsmi processor handle."""
    with library_session(host, "amdsmi", "amdsmi_init", "amdsmi_shut_down", NO_DRIVER) as smi:
        if smi is None:
            return None
        handles = smi.amdsmi_get_processor_handles()
        if not isinstance(handles, list):  # "" would read as "no GPU" and hide later layers
            raise TypeError(f"amdsmi_get_processor_handles() returned {handles!r:.80}")
        return [amdsmi_gpu(host, smi, n, handle) for n, handle in enumerate(handles)]


def amdsmi_gpu(host: Host, smi: Any, index: int, handle: object) -> Device:
    """One GPU from amdsmi's ASIC, VRAM and bus id answers for its handle."""
    vram = smi.amdsmi_get_gpu_vram_info(handle)  # the size is "vram_size_mb" in amdsmi 6.0
    size = vram_mib(find_field(vram, "vram_size", "vram_size_mb"))
    asic, bus = smi.amdsmi_get_gpu_asic_info(handle), smi.amdsmi_get_gpu_device_bdf(handle)
    return gpu(host, index, asic, bus, size)


def from_amd_smi(host: Host) -> Optional[list[Device]]:
    """``list`` names the GPUs; ``static`` (joined on its ``gpu`` field) adds model and VRAM."""
    listed = first_records(host, AMD_SMI_LIST)  # JSON without a GPU list: a warning, and None
    if listed is None:
        return None
    static = parse_json(run_command(host, AMD_SMI_STATIC), "amd-smi static output")
    details = {str(record.get("gpu")): record for record in json_records(static) or []}
    devices = []
    for index, record in enumerate(listed):
        facts = details.get(str(record.get("gpu")), {})
        size = find_field(find_field(facts, "vram") or facts, "size", "vram_size", "vram_size_mb")
        devices.append(gpu(host, index, facts, find_field(record, "bdf"), vram_mib(size)))
    return devices


def from_kfd(host: Host) -> Optional[list[Device]]:
    """GPU nodes of the KFD topology (CPU nodes skipped), as ROCr numbers them; None if none."""
    nodes = [p for p in kfd_gpu_nodes(host) or [] if p.get("vendor_id") == AMD_VENDOR]
    gpus = [gpu(host, n, node, kfd_bus_id(node)) for n, node in enumerate(nodes)]
    return gpus if gpus else None


def from_drm(host: Host) -> Optional[list[Device]]:
    """DRM cards of vendor 0x1002 (a card and its render node count once), in bus order."""
    cards = drm_devices(host, AMD_VENDOR)
    return None if cards is None else [gpu(host, n, {}, c.bus_id) for n, c in enumerate(cards)]


@hookimpl
def accelkit_register_managers() -> list[AcceleratorManager]:
    """The plugin's one manager, for every scheduler that loads accelkit."""
    return [AmdManager()]
