"""The architecture's promises, each proved in a fresh interpreter: an allocator over a node's
JSON loads no plugin, the CLI imports only its verb, and the core holds no code that only one
plugin uses."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NODES = ROOT / "examples" / "nodes"


def run_python(script: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


def node_json(name: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "accelkit.cli", "ls", "--json", "--host", str(NODES / name)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out


ALLOCATE = """
import json, sys
import accelkit
node = accelkit.Node.from_dict(json.loads({data!r}))
alloc = accelkit.Allocator(node)
for _ in range(1000):
    grant = alloc.acquire({request!r})
    assert grant is not None, "nothing granted"
    alloc.release(grant)
grant = alloc.acquire({request!r})
loaded = sorted(m for m in sys.modules if m == "pluggy" or m.startswith(("accelkit_plugins",
    "accelkit.registry", "accelkit.node._detect")))
print(json.dumps({{"loaded": loaded, "ids": grant.ids}}))
"""


@pytest.mark.parametrize(
    ("node", "request_", "ids"),
    [
        ("nvidia-h100-8gpu", {"GPU": 0.5}, {"GPU": ["0"]}),
        ("tpu-v6e-8", {"TPU": 4}, {"TPU": ["0", "1", "2", "3"]}),
        ("neuron-trn1-32xlarge", {"neuron_cores": 3}, {"neuron_cores": ["0", "1", "2"]}),
    ],
)
def test_allocating_over_node_json_loads_no_plugin_and_no_pluggy(
    node: str, request_: dict[str, float], ids: dict[str, list[str]]
) -> None:
    data = json.loads(node_json(node))
    assert data["families"], "the node JSON carries each family's policy"
    script = ALLOCATE.format(data=json.dumps(data), request=request_)
    answer = json.loads(run_python(script))
    assert answer["loaded"] == [], f"allocating over JSON imported {answer['loaded']}"
    assert answer["ids"] == ids


def test_grant_env_over_json_says_which_plugin_it_needs() -> None:
    data = json.loads(node_json("nvidia-h100-8gpu"))
    script = f"""
import json
import accelkit
node = accelkit.Node.from_dict(json.loads({json.dumps(data)!r}))
grant = accelkit.Allocator(node).acquire({{"GPU": 1}})
try:
    grant.env(registry=accelkit.Registry([], autoload=False))
except accelkit.PluginError as error:
    print(json.dumps(str(error)))
"""
    message = json.loads(run_python(script))
    assert "needs the nvidia plugin" in message and "no accelerator family 'nvidia'" in message


def test_a_family_with_rules_in_plugin_code_is_asked_through_its_plugin() -> None:
    from accelkit import AcceleratorManager, Allocator, Device, InvalidRequest, Node, Registry
    from accelkit.hookspecs import hookimpl

    class Picky(AcceleratorManager):
        name = "picky"
        resource_name = "PICK"

        def detect(self, host: object) -> list[Device]:
            return []

        def validate_quantity(self, quantity: object) -> int:
            if quantity != 1:
                raise InvalidRequest(f"picky devices come one at a time, not {quantity!r}")
            return 10_000

    class Plugin:
        @hookimpl
        def accelkit_register_managers(self) -> list[AcceleratorManager]:
            return [Picky()]

    policy = Picky().policy()
    assert policy.plugin_rules == ("validate_quantity",)
    node = Node(
        devices=[Device(str(n), n, family="picky", resource_name="PICK") for n in range(2)],
        resources={"PICK": 2.0},
        policies={"picky": policy},
    )
    registry = Registry([Plugin()], autoload=False)
    with pytest.raises(InvalidRequest, match="one at a time"):
        Allocator(Node.from_dict(node.to_dict()), registry=registry).acquire({"PICK": 2})


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["ls", "--host", str(NODES / "nvidia-h100-8gpu")],
        ["env", "-r", "GPU=1", "--host", str(NODES / "nvidia-h100-8gpu")],
        ["resources", "--format", "ray", "--host", str(NODES / "nvidia-h100-8gpu")],
        ["ps", "--json", "--ledger", "/nonexistent/accelkit-test/ledger.json"],
    ],
)
def test_the_cli_imports_only_its_verb(argv: list[str]) -> None:
    script = f"""
import contextlib, io, json, sys
from accelkit.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main({argv!r})
    except SystemExit:
        pass
verb = next((w for w in {argv!r} if not w.startswith("-")), None)
own = "accelkit.cli." + verb.replace("-", "_") if verb else None
print(json.dumps(sorted(m for m in sys.modules if m.startswith("accelkit.testing")
                        or m.startswith(("accelkit.integrations", "distributed", "ray"))
                        or m in ("pytest", "asyncio", "accelkit.cli.checking")
                        or (verb and m.startswith("accelkit.cli.") and m != own
                            and not m.startswith("accelkit.cli._")))))
"""
    assert json.loads(run_python(script)) == []


def test_no_core_module_serves_only_one_plugin() -> None:
    """What one vendor alone needs lives in its plugin; the core's modules serve several."""
    users: dict[str, set[str]] = {}
    for path in (ROOT / "plugins").rglob("*.py"):
        vendor = path.relative_to(ROOT / "plugins").parts[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("accelkit."):
                users.setdefault(node.module or "", set()).add(vendor)
    lonely = {module: vendors for module, vendors in users.items() if len(vendors) == 1}
    assert not lonely, f"core modules imported by one plugin only: {lonely}"
    assert set(users) == {"accelkit.detect"}, "plugins import accelkit and accelkit.detect only"
