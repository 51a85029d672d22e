"""Pod facts from the Cloud TPU metadata server, only for users who opt in.

A TPU VM started without the ``TPU_*`` variables (outside GKE, without the TPU VM image's
profile) still knows its slice through the GCE metadata server. ``ACCELKIT_TPU_METADATA=1``
allows one bounded attempt (1 s in all) to fill the variables the environment lacks; the
environment always wins. ``ACCELKIT_TPU_METADATA_URL`` points at another server (a proxy, or a
test's). The default server is an address, not a name: a DNS lookup could outlast the budget.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping

from accelkit import Host, note
from accelkit.detect import read_metadata

__all__ = ["METADATA_VARS", "pod_env"]

OPT_IN = "ACCELKIT_TPU_METADATA"
SERVER = "ACCELKIT_TPU_METADATA_URL"
METADATA_VARS = (OPT_IN, SERVER)
DEFAULT_SERVER = "http://169.254.169.254/computeMetadata/v1/instance/attributes/"
ATTRIBUTES = {  # metadata attribute -> the variable it stands in for
    "accelerator-type": "TPU_ACCELERATOR_TYPE",
    "agent-worker-number": "TPU_WORKER_ID",
    "instance-id": "TPU_NAME",
}
_answers: weakref.WeakKeyDictionary[Host, dict[str, str]] = weakref.WeakKeyDictionary()


def pod_env(host: Host) -> Mapping[str, str]:
    """The host's variables, with the pod facts they lack from the metadata server if opted in.

    The server is asked once per host object: detection's chips, labels and resources share it.
    """
    if host.env.get(OPT_IN, "").strip().lower() not in ("1", "true", "yes", "on"):
        return host.env
    missing = {a: v for a, v in ATTRIBUTES.items() if not host.env.get(v, "").strip()}
    if not missing:
        return host.env
    if host not in _answers:
        server = host.env.get(SERVER) or DEFAULT_SERVER
        _answers[host] = read_metadata(server, missing, {"Metadata-Flavor": "Google"})
        if _answers[host]:
            note(f"pod facts from the TPU metadata server: {sorted(_answers[host])}")
    return {**host.env, **_answers[host]}
