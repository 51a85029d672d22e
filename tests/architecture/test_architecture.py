"""The architecture's promises, each proved in a fresh interpreter: an allocator over a node's
JSON loads no plugin, the CLI imports only its verb, and the core's public toolkit holds no name
that only one plugin uses unless it is documented for every author."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import accelkit.detect
import pytest
from accelkit import PluginWarning

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
    "accelkit.registry", "accelkit.node._detect",
    "accelkit.node._operator", "accelkit.node._resources", "accelkit.node._state",
    "accelkit.node._visibility")))
print(json.dumps({{"loaded": loaded, "ids": grant.ids}}))
"""


@pytest.mark.parametrize(
    ("node", "request_", "ids"),
    [
        ("nvidia-h100-8gpu", {"GPU": 0.5}, {"GPU": ["0"]}),
        ("tpu-v6e-8", {"TPU": 4}, {"TPU": ["0", "1", "2", "3"]}),
        ("neuron-trn1-32xlarge", {"neuron_cores": 2}, {"neuron_cores": ["0", "1"]}),
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


def test_rules_in_plugin_code_are_refused_and_a_node_json_carries_none() -> None:
    """Quantity and placement rules are data only (contract version 2): a version-2 manager that
    codes its own quantity rule is refused by the loader with what to declare instead, and a node
    JSON naming rules in plugin code (written by no accelkit since version 2) is invalid."""
    from accelkit import AcceleratorManager, Device, InvalidData, InvalidRequest, Node, Registry
    from accelkit.hookspecs import hookimpl

    class Picky(AcceleratorManager):
        name = "picky"
        resource_name = "PICK"
        api_version = 2

        def detect(self, host: object) -> list[Device]:
            return []

        def validate_quantity(self, quantity: object) -> int:  # type: ignore[misc]
            if quantity != 1:
                raise InvalidRequest(f"picky devices come one at a time, not {quantity!r}")
            return 10_000

    class Plugin:
        @hookimpl
        def accelkit_register_managers(self) -> list[AcceleratorManager]:
            return [Picky()]

    registry = Registry([Plugin()], autoload=False)
    with pytest.warns(PluginWarning, match="overrides validate_quantity"):
        (info,) = registry.report()
    assert info.status == "error"
    assert "declare fractional and scheduling.allowed_quantities instead" in (info.error or "")
    data = Node(resources={}).to_dict()
    data["families"] = {"picky": {"resource_name": "PICK", "plugin_rules": ["validate_quantity"]}}
    with pytest.raises(InvalidData, match="rules in plugin code are gone"):
        Node.from_dict(data)


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["ls", "--host", str(NODES / "nvidia-h100-8gpu")],
        ["env", "-r", "GPU=1", "--host", str(NODES / "nvidia-h100-8gpu")],
        ["resources", "--format", "ray", "--host", str(NODES / "nvidia-h100-8gpu")],
        ["ps", "--json", "--ledger", "/nonexistent/accelkit-test/ledger.json"],
        ["verify", "--host", str(NODES / "nvidia-h100-8gpu")],
    ],
)
def test_the_cli_imports_only_its_verb(argv: list[str]) -> None:
    """A verb imports its own module and the shared one, no other verb's, no engine, and not
    ``ctypes`` (only the process ``verify`` starts loads a runtime library)."""
    script = f"""
import contextlib, io, json, sys
from accelkit.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main({argv!r})
    except SystemExit:
        pass
verb = next((w for w in {argv!r} if not w.startswith("-")), None)
own = "accelkit.cli._" + verb.replace("-", "_") if verb else None
print(json.dumps(sorted(m for m in sys.modules if m.startswith("accelkit.testing")
                        or m.startswith(("accelkit.integrations", "distributed", "ray"))
                        or m in ("pytest", "asyncio", "ctypes", "accelkit.cli._checking")
                        or (verb and m.startswith("accelkit.cli._") and m != own
                            and m != "accelkit.cli._common"))))
"""
    assert json.loads(run_python(script)) == []


NOT_AT_START = {"fractions", "decimal"}
"""Loaded only by a quantity written ``1/3`` (or a ``Decimal`` the caller brought)."""
NOT_FOR_THE_LEDGER = {"tempfile", "random", "hashlib", "_hashlib"}
"""What the ledger once loaded for a temporary directory's name and a node's fingerprint: 5 ms
and 3.5 MiB (OpenSSL) of every ``accelkit run``."""
NOT_FOR_A_GRANT = {"pathlib", "urllib.parse", "ipaddress"}
"""What the ledger once loaded to join its paths: 2.5 ms of every ``accelkit run`` and ``env``
on this machine (a replayed node reads its snapshot with ``pathlib``)."""
A_LOGICAL_GPU = {"ACCELKIT_OVERRIDE_RESOURCES": '{"GPU": 1}'}
"""The operator's override, so that this machine has a GPU to grant whatever it has."""


@pytest.mark.parametrize(
    ("argv", "unwanted", "environ"),
    [
        # detecting this machine runs vendor commands and looks for libraries (subprocess,
        # ctypes.util, and shutil with them); env reads the ledger
        (["ls", "--json"], NOT_AT_START, {}),
        (
            ["env", "-r", "GPU=1", "--host", str(NODES / "nvidia-h100-8gpu")],
            {*NOT_AT_START, *NOT_FOR_THE_LEDGER},
            {},
        ),
        (
            ["run", "-r", "GPU=1", "--host", str(NODES / "nvidia-h100-8gpu"), "--", "true"],
            {*NOT_AT_START, *NOT_FOR_THE_LEDGER},
            {},
        ),
        # on this machine, whose detection looks for libraries with ctypes.util (which imports
        # tempfile on some Python versions): the ledger's part
        (["env", "-r", "GPU=1"], NOT_FOR_A_GRANT, A_LOGICAL_GPU),
        (["run", "-r", "GPU=1", "--", "true"], NOT_FOR_A_GRANT, A_LOGICAL_GPU),
        # a replayed node and --version need neither: argparse's own formatter alone would load
        # shutil, for the terminal's width
        # and, with no command left running when detection ends, no signal to kill one with
        (
            ["ls", "--json", "--host", str(NODES / "nvidia-h100-8gpu")],
            {*NOT_AT_START, "shutil", "signal"},
            {},
        ),
        (["--version"], {*NOT_AT_START, "shutil"}, {}),
    ],
)
def test_the_start_up_paths_skip_what_they_do_not_use(
    argv: list[str], unwanted: set[str], environ: dict[str, str], tmp_path: Path
) -> None:
    """``ls``, ``env`` and ``run`` start without what they do not use: each module is start-up
    time a run need not pay (``run`` is stopped where it would ``exec`` the command, its grant
    taken in a ledger of its own). Third-party entry points are not scanned here: reading
    installed distributions loads ``zipfile`` and with it ``shutil``, a cost of having plugins
    installed, not of accelkit."""
    script = f"""
import os, sys
os.environ["ACCELKIT_DISABLE_PLUGIN_AUTOLOAD"] = "1"
os.environ["ACCELKIT_LEDGER"] = {str(tmp_path / "ledger.json")!r}
os.environ.update({environ!r})
def stop_before_exec(*args):
    raise SystemExit(0)
os.execvpe = stop_before_exec
before = set(sys.modules)  # an editable install's path hook may load shutil itself
for name in {sorted(NOT_FOR_A_GRANT & unwanted)!r}:  # and pathlib: forgotten, a new import shows
    sys.modules.pop(name, None)
    before.discard(name)
import contextlib, io, json
from accelkit.cli import main
err = io.StringIO()
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
    try:
        main({argv!r})
    except SystemExit as exit:
        assert exit.code in (0, None), err.getvalue()
print(json.dumps(sorted(set({sorted(unwanted)!r}) & (set(sys.modules) - before))))
"""
    assert json.loads(run_python(script)) == []


def toolkit_users() -> dict[str, set[str]]:
    """Each ``accelkit.detect`` name the built-in plugins use, and which plugins use it
    (``from accelkit.detect import x``, or ``x`` as an attribute of the imported module)."""
    users: dict[str, set[str]] = {}
    for path in (ROOT / "plugins").rglob("*.py"):
        parts = path.relative_to(ROOT / "plugins").parts
        if len(parts) < 2:
            continue  # plugins/__init__.py: the namespace, no plugin
        tree = ast.parse(path.read_text())
        modules = {"accelkit.detect"}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "accelkit.detect":
                for alias in node.names:
                    users.setdefault(alias.name, set()).add(parts[0])
            elif isinstance(node, ast.ImportFrom) and node.module == "accelkit":
                modules |= {a.asname or a.name for a in node.names if a.name == "detect"}
            elif isinstance(node, ast.Import):
                modules |= {a.asname or a.name for a in node.names if a.name == "accelkit.detect"}
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and ast.unparse(node.value) in modules:
                users.setdefault(node.attr, set()).add(parts[0])
    return users


def guide_entries() -> set[str]:
    """The names the plugin guide documents for authors, one ``#### `name...``` entry each."""
    text = (ROOT / "docs" / "plugin-authoring.md").read_text()
    return set(re.findall(r"^#### `([A-Za-z_][A-Za-z0-9_]*)", text, re.MULTILINE))


@pytest.mark.parametrize("name", sorted(accelkit.detect.__all__))
def test_each_toolkit_name_serves_several_plugins_or_every_author(name: str) -> None:
    """What one vendor alone needs lives in its plugin: a public toolkit name is there because
    two or more built-in plugins use it, or because the guide documents it for every author."""
    users = sorted(toolkit_users().get(name, ()))
    assert len(users) >= 2 or name in guide_entries(), (
        f"accelkit.detect.{name} is used by {users or 'no built-in plugin'} and is not documented "
        "in docs/plugin-authoring.md: move it into that plugin, or document it for authors"
    )


def test_plugins_use_only_the_public_contract_and_toolkit() -> None:
    """A plugin is written as a third party would write it: ``accelkit`` and the public
    ``accelkit.detect`` names, nothing private or internal; its fake hosts (``testing.py``, the
    kit's backdoor) may also use the kit's fake libraries from ``accelkit.testing``."""
    imported: dict[str, set[str]] = {}
    for path in (ROOT / "plugins").rglob("*.py"):
        vendor = path.relative_to(ROOT / "plugins").parts[0]
        kit = {"accelkit.testing"} if path.name == "testing.py" else set()
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            module = node.module or ""
            if module.startswith("accelkit.") and module not in kit:
                imported.setdefault(module, set()).add(vendor)
    assert set(imported) <= {"accelkit.detect"}, f"plugins import core modules: {imported}"
    private = set(toolkit_users()) - set(accelkit.detect.__all__)
    assert not private, f"plugins use accelkit.detect names outside its __all__: {private}"


def test_no_regular_expression_is_compiled_at_import() -> None:
    """A module-level ``re.compile`` costs every start-up its compilation (one of NVIDIA's took
    1 ms), used or not; the core and the built-ins keep the pattern's text and call ``re.match``
    (and the others) with it, which compiles on first use and caches. The kit and the snapshot
    recorder run apart from the start-up paths."""
    allowed = {"node/_snapshot.py"}
    found = []
    for base in (ROOT / "core" / "accelkit", ROOT / "plugins"):
        for path in base.rglob("*.py"):
            name = path.relative_to(base).as_posix()
            if name in allowed or name.startswith("testing/"):
                continue
            found += [
                f"{path.relative_to(ROOT)}:{call.lineno}"
                for call in _run_at_import(ast.parse(path.read_text()))
                if isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr == "compile"
                and isinstance(call.func.value, ast.Name)
                and call.func.value.id == "re"
            ]
    assert found == []


def _run_at_import(node: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``node`` that run when it runs: not the bodies of the functions it defines."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        yield child
        yield from _run_at_import(child)
