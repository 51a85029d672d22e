"""Variable claims: a family whose runtime reads another vendor's visibility variable.

Some runtimes read a variable another family is known by: MetaX's reads
``CUDA_VISIBLE_DEVICES``, Hygon's DCU runtime ``HIP_VISIBLE_DEVICES``. Such a family's plugin
claims the variable by declaring it as its primary one (``visible_devices_env_var``), and on a
node where that family's devices are detected the variable is theirs. One step of
:data:`~accelkit.node._detect.STEPS`, after the partitions and before visibility is read:

- A family that detected nothing makes no logical devices from a variable another family with
  devices claims (the NVIDIA family would otherwise turn ``CUDA_VISIBLE_DEVICES=0,1`` on a MetaX
  node into two stand-in NVIDIA GPUs, or the AMD family read Hygon's ``HIP_VISIBLE_DEVICES``):
  the claimed variables are taken out of that family's view of the environment, with a note.
- Two families with devices that claim one primary variable are a
  :class:`~accelkit.ConfigurationError` naming both: a grant's ``CUDA_VISIBLE_DEVICES=0`` would
  show the worker device 0 of each, so the node cannot be offered as a silent mix.
"""

from __future__ import annotations

from accelkit.diagnostics import note
from accelkit.errors import ConfigurationError
from accelkit.host import HostView
from accelkit.node._state import Detection, Family
from accelkit.registry import variables_read

__all__ = ["step_claim_clash", "step_claims"]


def _claims(state: Detection, devices: bool = False) -> dict[str, list[Family]]:
    """Primary variable -> the families that detected devices and declare it (``devices``:
    only those with devices left after the operator's exclusions)."""
    claims: dict[str, list[Family]] = {}
    for family in state.families:
        variable = family.manager.visible_devices_env_var
        if variable and family.detected and (family.devices or not devices):
            claims.setdefault(variable, []).append(family)
    return claims


def step_claims(state: Detection) -> None:
    """A family that detected nothing makes no devices from a variable a detected family
    claims: the variable leaves that family's view of the environment, with a note."""
    claims = _claims(state)
    for family in state.families:
        if family.detected:
            continue
        read = set(variables_read(family.manager))
        taken = {v: owners[0] for v, owners in claims.items() if v in read and v in family.host.env}
        if not taken:
            continue
        with state.noting(family):
            for variable, owner in taken.items():
                note(
                    f"{variable} is claimed by the {owner.manager.name} family, whose devices "
                    f"are detected: no {family.manager.name} devices are made from it"
                )
        kept = [name for name in family.host.env if name not in taken]
        family.host = HostView(family.host, kept)


def step_claim_clash(state: Detection) -> None:
    """Two families with devices (after the operator's exclusions) that claim one primary
    variable are a :class:`~accelkit.ConfigurationError` naming both."""
    for variable, owners in _claims(state, devices=True).items():
        if len(owners) > 1:
            raise ConfigurationError(_clash(state, variable, owners))


def _clash(state: Detection, variable: str, owners: list[Family]) -> str:
    """The error for two families with devices that claim one variable: both named, and how
    to leave one out."""
    plugins = {f: i for i in state.registry.report() if i.status == "ok" for f in i.families}
    named, blocked = [], []
    for family in owners:
        info = plugins.get(family.manager.name)
        origin = info.describe() if info else f"the {family.manager.name} plugin"
        named.append(f"{family.manager.name} ({len(family.devices)} device(s), {origin})")
        blocked.append(info.name if info else family.manager.name)
    return (
        f"{variable} is claimed by {' and by '.join(named)}, and both have devices on this "
        f"node: a grant's {variable}=0 would show the worker device 0 of each. Leave one "
        f"family out: block its plugin (ACCELKIT_DISABLE_PLUGINS={blocked[-1]}) or exclude its "
        f"devices (ACCELKIT_EXCLUDE_DEVICES={owners[-1].manager.name}:0,...)"
    )
