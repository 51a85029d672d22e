"""``accelkit verify``: ask each family's own runtime whether a grant's environment shows exactly
the granted device.

Detection reads vendor tools and files; a worker meets the runtime library. ``verify`` closes
that gap: for each family whose runtime has a device-count call (:data:`RUNTIMES`), it grants
every device of the node one at a time, as a scheduler would on an idle node, and starts one
small process per grant with that grant's environment (``Grant.env``). The process loads the
runtime (``accelkit/cli/_verify_child.py``, standard library only) and answers how many devices
it sees and their UUIDs; the grant passes when the runtime sees exactly one device, with the
node's UUID for it where both know one. A mismatch (the runtime sees none, two, or another GPU)
or a process that fails is exit status 1.

The processes only count devices and read UUIDs (CUDA's calls create no context), so no grant
is taken from the node's ledger and jobs running on the devices are not disturbed. With
``--host DIR`` (a recorded node) there is no runtime to ask: the plan is printed, each row "not
run". ``ACCELKIT_VERIFY_CUDA_LIBRARY`` / ``ACCELKIT_VERIFY_HIP_LIBRARY`` name the library to load
instead of the system's, e.g. a stand-in runtime that answers as a recorded machine did (a
``.py`` file; that is how the tests, and a snapshot, get a runtime). A library so named that
cannot be loaded fails its rows (the user asked for it); only the system's, absent, skips them.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Optional

from accelkit.cli import EXIT_FAILED, EXIT_OK, printable
from accelkit.cli._common import host_from_args, print_json, table
from accelkit.schedule._grant import grant_text

if TYPE_CHECKING:
    from accelkit.device import Device
    from accelkit.node._record import Node
    from accelkit.schedule._grant import Grant


class Runtime(NamedTuple):
    """A family's runtime library, as the verifying process loads it."""

    name: str
    """What people call it, for the table (``"CUDA"``)."""
    calls: str
    """The calls the child process makes, by its name for them (``_verify_child.ASK``)."""
    libraries: tuple[str, ...]
    """Library names to try, in order, unless :attr:`override` names one."""
    override: str
    """The variable that names the library to load instead (a stand-in, or another build)."""


RUNTIMES = {
    "nvidia": Runtime(
        "CUDA", "cuda", ("libcuda.so.1", "libcuda.so"), "ACCELKIT_VERIFY_CUDA_LIBRARY"
    ),
    "amd": Runtime(
        "HIP",
        "hip",
        ("libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5", "/opt/rocm/lib/libamdhip64.so"),
        "ACCELKIT_VERIFY_HIP_LIBRARY",
    ),
}
"""Families whose runtime library has a device-count call, and how to load it."""

CHILD = Path(__file__).with_name("_verify_child.py")
COLUMNS = ("FAMILY", "GRANT", "ENV", "RUNTIME SAW", "VERDICT")


class Row(NamedTuple):
    """One grant and what its runtime made of its environment."""

    family: str
    grant: Grant
    env: dict[str, Optional[str]]
    expected_uuid: Optional[str]
    saw: Optional[dict[str, Any]]
    verdict: str
    reason: str


def register(verbs: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``verify`` verb."""
    parser = verbs.add_parser(
        "verify",
        parents=[common],
        help="check with each family's runtime that every one-device grant sees its device",
        description=(
            "Grant each device of this node alone, start one process per grant with the "
            "grant's environment, and ask the family's runtime library what it sees: CUDA's "
            "libcuda (cuInit, cuDeviceGetCount, cuDeviceGetUuid) for NVIDIA, HIP's "
            "libamdhip64 (hipGetDeviceCount) for AMD. A grant passes when the runtime sees "
            "exactly one device, with the node's UUID for it where both give one. The processes "
            "only count devices and read UUIDs, so nothing is taken from the ledger. With "
            "--host DIR there is no "
            "runtime: the plan is printed, not run. ACCELKIT_VERIFY_CUDA_LIBRARY and "
            "ACCELKIT_VERIFY_HIP_LIBRARY name another library (or a .py stand-in runtime)."
        ),
        epilog="Exit status: 0 when every grant checked passed (or none could be run: no runtime "
        "installed); 1 on any mismatch or failed process, or when the library a variable names "
        "cannot be loaded; 2 on bad usage or input.",
    )
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument(
        "--timeout",
        type=_seconds,
        default=60.0,
        metavar="S",
        help="seconds one process may take to load and ask its runtime (default 60)",
    )
    parser.set_defaults(run=run)


def _seconds(text: str) -> float:
    """``--timeout``: a positive number of seconds, for argparse (anything else: a usage error)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def run(args: argparse.Namespace) -> int:
    """Plan the one-device grants, ask each runtime, print the rows."""
    from accelkit.node._detect import detect_node

    node = detect_node(host_from_args(args))
    recorded = bool(args.host)
    rows = [
        _checked(family, grant, recorded, args.timeout) for family, grant in one_device_grants(node)
    ]
    unchecked = sorted({d.family for d in node.devices} - set(RUNTIMES))
    failed = any(row.verdict in ("MISMATCH", "ERROR") for row in rows)
    if args.json:
        print_json(
            {
                "ok": not failed,
                "rows": [_row_json(row) for row in rows],
                "unchecked": unchecked,
            }
        )
        return EXIT_FAILED if failed else EXIT_OK
    print("\n".join(report(rows, unchecked, recorded)))
    return EXIT_FAILED if failed else EXIT_OK


def one_device_grants(node: Node) -> list[tuple[str, Grant]]:
    """A grant of each device of the families in :data:`RUNTIMES`, one device each, taken as a
    scheduler takes them on an idle node (so ids, partitions and placement are the real ones)."""
    from accelkit.schedule._allocator import Allocator

    resources = list(dict.fromkeys(d.resource_name for d in node.devices if d.family in RUNTIMES))
    alloc = Allocator(node)
    grants: list[tuple[str, Grant]] = []
    for resource in resources:
        grant = alloc.acquire({resource: 1})
        while grant is not None:
            family = grant.devices[0][0].family
            if family in RUNTIMES:
                grants.append((family, grant))
            grant = alloc.acquire({resource: 1})
    return grants


def _checked(family: str, grant: Grant, recorded: bool, timeout: float) -> Row:
    """The grant's row: its environment, and what the runtime saw under it."""
    device: Device = grant.devices[0][0]
    env = grant.env(os.environ)
    runtime = RUNTIMES[family]
    library = os.environ.get(runtime.override)
    if recorded and not library:
        reason = f"a recorded node has no runtime (set {runtime.override} to a stand-in)"
        return Row(family, grant, env, device.uuid, None, "not run", reason)
    libraries = (library,) if library else runtime.libraries
    saw = ask(runtime, libraries, env, timeout)
    if library and not saw.get("loaded") and "error" not in saw:
        reason = f"{runtime.override}={library} cannot be loaded ({saw.get('status')})"
        return Row(family, grant, env, device.uuid, saw, "ERROR", reason)
    verdict, reason = judge(runtime, saw, device.uuid)
    return Row(family, grant, env, device.uuid, saw, verdict, reason)


def ask(
    runtime: Runtime,
    libraries: Sequence[str],
    env: Mapping[str, Optional[str]],
    timeout: float,
) -> dict[str, Any]:
    """What ``runtime`` shows a process started with ``env`` applied to this one's environment:
    the child's JSON answer, or ``{"error": ...}`` when the process failed."""
    child_env = dict(os.environ)
    for name, value in env.items():
        if value is None:
            child_env.pop(name, None)
        else:
            child_env[name] = value
    argv = [sys.executable, "-I", "-S", str(CHILD), runtime.calls, *libraries]
    try:
        done = subprocess.run(
            argv, env=child_env, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return {"error": f"the {runtime.name} process did not answer within {timeout:g}s"}
    except OSError as exc:
        return {"error": f"cannot start {sys.executable}: {exc}"}
    lines = done.stdout.strip().splitlines()
    try:
        answer = json.loads(lines[-1])
    except (IndexError, ValueError):
        answer = None
    if not isinstance(answer, dict):  # the process died before its answer (a crashing runtime)
        said = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"the {runtime.name} process exited with {done.returncode}: {said}"}
    return answer


def judge(runtime: Runtime, saw: Mapping[str, Any], uuid: Optional[str]) -> tuple[str, str]:
    """The verdict on what the runtime saw under a one-device grant, and why."""
    if "error" in saw:
        return "ERROR", str(saw["error"])
    if not saw.get("loaded"):
        return "skipped", f"{runtime.name} is not installed here ({saw.get('status')})"
    count = saw.get("count")
    if count != 1:
        status = saw.get("status")
        why = "" if status == "ok" else f" ({status})"
        return "MISMATCH", f"{runtime.name} saw {_devices(count)}, not 1{why}"
    expected = _hex(uuid)
    found = (saw.get("uuids") or [None])[0]
    if expected and found and expected != found:
        return "MISMATCH", f"{runtime.name} saw {_uuid(found, uuid)}, not {uuid}"
    return "ok", ""


def _hex(uuid: Optional[str]) -> Optional[str]:
    """The 32 hex digits of a ``GPU-``/``MIG-`` UUID, None when it has no such form."""
    if not uuid:
        return None
    digits = uuid.split("-", 1)[1] if uuid[:4].upper() in ("GPU-", "MIG-") else uuid
    digits = digits.replace("-", "").lower()
    if len(digits) != 32 or any(ch not in "0123456789abcdef" for ch in digits):
        return None
    return digits


def _uuid(digits: str, like: Optional[str]) -> str:
    """32 hex digits as a UUID, with the prefix of ``like`` (``GPU-``, ``MIG-``) if it has one."""
    prefix = like[:4] if like and like[:4].upper() in ("GPU-", "MIG-") else ""
    parts = (digits[:8], digits[8:12], digits[12:16], digits[16:20], digits[20:])
    return prefix + "-".join(parts)


def _saw_text(row: Row) -> str:
    """``CUDA: 1 device GPU-f40d…`` for the table."""
    name = RUNTIMES[row.family].name
    saw = row.saw
    if saw is None:
        return f"{name}: none (recorded node)"
    if "error" in saw or not saw.get("loaded"):
        return f"{name}: -"
    uuids = _uuids(saw, row.expected_uuid)
    found = _devices(saw.get("count")) + (f" {', '.join(uuids[:2])}" if uuids else "")
    status = saw.get("status")
    return f"{name}: {found}" + ("" if status == "ok" else f" ({status})")


def _devices(count: object) -> str:
    return "1 device" if count == 1 else f"{count} devices"


def _uuids(saw: Mapping[str, Any], like: Optional[str]) -> list[str]:
    """The UUIDs the runtime gave, written as the node writes its own (``GPU-…``)."""
    return [_uuid(u, like) for u in saw.get("uuids") or [] if isinstance(u, str) and len(u) == 32]


def _env_text(env: Mapping[str, Optional[str]]) -> str:
    """``CUDA_VISIBLE_DEVICES=0 CUDA_DEVICE_ORDER=PCI_BUS_ID``, unset ones as ``-NAME``."""
    return " ".join(f"-{k}" if v is None else f"{k}={v}" for k, v in env.items()) or "-"


def report(rows: Sequence[Row], unchecked: Sequence[str], recorded: bool) -> list[str]:
    """The table, then why each row that did not pass did not, as lines."""
    if not rows:
        lines = [f"Nothing to verify: no device of {', '.join(RUNTIMES)} on this node."]
    else:
        cells = [
            [r.family, grant_text(r.grant), _env_text(r.env), _saw_text(r), r.verdict] for r in rows
        ]
        lines = table([[printable(c) for c in row] for row in cells], COLUMNS)
    reasons = [
        printable(f"  {r.family} {grant_text(r.grant)}: {r.reason}")
        for r in rows
        if r.verdict not in ("ok", "not run")
    ]
    if reasons:
        lines += ["", *reasons]
    if recorded and any(r.verdict == "not run" for r in rows):
        variables = " or ".join(sorted({RUNTIMES[r.family].override for r in rows}))
        lines += [
            "",
            "--host replays a recorded node: it has no runtime to ask, so nothing was run "
            f"({variables} names a stand-in runtime to ask instead).",
        ]
    if unchecked:
        lines += ["", f"Not checked (no runtime device count known): {', '.join(unchecked)}"]
    return lines


def _row_json(row: Row) -> dict[str, Any]:
    """A row for ``--json``: what was granted and expected, what the runtime saw (its UUIDs
    written as the node writes them), the verdict and why."""
    saw = row.saw
    if saw is not None:
        saw = {**saw, "uuids": _uuids(saw, row.expected_uuid)}
    return {
        "family": row.family,
        "runtime": RUNTIMES[row.family].name,
        "grant": row.grant.ids,
        "env": row.env,
        "expected": {"count": 1, "uuid": row.expected_uuid},
        "saw": saw,
        "verdict": row.verdict,
        "reason": row.reason,
    }
