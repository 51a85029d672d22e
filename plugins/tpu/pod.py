"""Multi-host slices: the resources and labels that let a scheduler place one job on one slice.

A slice (a TPU pod slice, for one) is several hosts that run one job together, each started
with variables that name the slice and the host's rank in it. Each host offers
``{<slice name>: 1}``, so a job can ask for one bundle on every host of the same slice, and the
slice's first worker also offers ``{<head>: 1}``, so one task can be placed there to start the
others: the convention Ray uses for TPU pods. The family supplies the variable names and the
head resource's name; the mechanics are here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Optional

from accelkit.detect import is_index

__all__ = ["env_labels", "slice_resources"]


def slice_resources(name: Optional[str], worker: Optional[str], head: str) -> dict[str, float]:
    """``{name: 1}`` on every worker and ``{head: 1}`` on worker 0; ``{}`` unless both the slice
    name and a whole-number worker rank are given (a lone host is not a slice)."""
    name, worker = (name or "").strip(), (worker or "").strip()
    if not name or not is_index(worker):
        return {}
    return {name: 1.0, **({head: 1.0} if int(worker) == 0 else {})}


def env_labels(env: Mapping[str, str], variables: Mapping[str, str]) -> dict[str, str]:
    """``{label: value}`` for each ``{label: variable}`` whose variable is set and not blank."""
    return {label: env[var].strip() for label, var in variables.items() if env.get(var, "").strip()}
