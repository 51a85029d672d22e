"""The core's layering (STYLE.md): each module imports only from its own layer or below, and
no imports run in a circle.

Imports under ``if TYPE_CHECKING:`` are checked too: each must name a module that exists, and may
not reach above the importing module's layer except for the record types the hook contract
passes to plugins (``Node``, ``Grant``), which the hook machinery below them must name in its
signatures: ``Grant.env`` calls the plugins' hooks and the hooks receive the grant, so that
one edge is a type, never an import. Every name in :data:`LAYERS` must be a real module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[2] / "core" / "accelkit"

LAYERS = {
    # 0: plain data, text rules, switches, JSON keys, lazy exports, the version, and which
    # importlib.metadata to read, importing nothing above
    "errors": 0,
    "device": 0,
    "diagnostics": 0,
    "visibility": 0,
    "metadata": 0,
    "settings": 0,
    "_json": 0,
    "_faults": 0,
    "_shown": 0,
    "_stdout": 0,  # keeping vendor libraries' printing off stdout: the standard library only
    "_lazy": 0,
    "_version": 0,
    "poolworker": 0,  # a pool's worker process: the standard library only, before each call
    # 1: the machine and the numbers, and the ledger's file and holders
    "host": 1,
    "holder": 1,
    "ledgerfile": 1,
    "deadlines": 1,
    "quantities": 1,
    "placement": 1,
    # 2: the contract, the node record and the shared detection helpers: all a plugin imports
    "policy": 2,
    "node": 2,
    "manager": 2,
    "detect": 2,
    "detection": 3,  # the deprecated shim re-exports accelkit.detect
    # 3: hooks, built-in hook plugins and the conformance kit
    "hookspecs": 3,
    "hints": 3,
    "testing": 3,
    # 4: discovery
    "registry": 4,
    # 5: detecting a node, and what a grant is
    "pipeline": 5,
    "grant": 5,
    "runtime": 5,
    "request": 5,
    "snapshot": 5,
    # 6: allocation, the node's shared ledger, and training plans
    "scaling": 6,
    "allocator": 6,
    "exports": 6,
    "ledger": 6,
    "workerprocess": 6,
    # 7: faces
    "cli": 7,
    "integrations": 7,
    "pool": 7,
    "__init__": 7,
}
HOOK_RECORDS = {"node", "grant"}
"""The records the hook contract passes to plugins: type-only imports of them may reach up."""


def module_name(path: Path) -> str:
    parts = path.relative_to(CORE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts) or "__init__"


def layer(module: str) -> int:
    top = module.split(".")[0]
    assert top in LAYERS, f"accelkit.{module} has no layer: add it to LAYERS in {__file__}"
    return LAYERS[top]


def runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node except those under ``if TYPE_CHECKING:``."""
    found: list[ast.AST] = []
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            pending.extend(node.orelse)
            continue
        found.append(node)
        pending.extend(ast.iter_child_nodes(node))
    return found


def type_only_nodes(tree: ast.AST) -> list[ast.AST]:
    """The nodes under ``if TYPE_CHECKING:``."""
    found: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                found.extend(ast.walk(child))
    return found


def imports(path: Path, type_only: bool = False) -> set[str]:
    """The accelkit modules ``path`` imports at run time (or, with ``type_only``, under
    ``if TYPE_CHECKING:``), as names relative to the package."""
    here = module_name(path)
    if path.name == "__init__.py":
        package = [] if here == "__init__" else here.split(".")
    else:
        package = here.split(".")[:-1]
    found: set[str] = set()
    tree = ast.parse(path.read_text())
    for node in type_only_nodes(tree) if type_only else runtime_nodes(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - (node.level - 1)]
            target = [*base, *(node.module.split(".") if node.module else [])]
            if node.module:
                found.add(".".join(target))
            for alias in node.names:
                name = ".".join([*target, alias.name])
                if (CORE / Path(*name.split("."))).with_suffix(".py").exists() or (
                    CORE / Path(*name.split("."))
                ).is_dir():
                    found.add(name)
                elif not node.module:
                    found.add(".".join(target) or "__init__")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
            for name in names:
                if name and (name == "accelkit" or name.startswith("accelkit.")):
                    found.add(name.partition(".")[2] or "__init__")
    return {m for m in found if m and m != here}


GRAPH = {module_name(p): imports(p) for p in sorted(CORE.rglob("*.py"))}
TYPE_GRAPH = {module_name(p): imports(p, type_only=True) for p in sorted(CORE.rglob("*.py"))}


def exists(module: str) -> bool:
    """Whether ``accelkit.<module>`` is a module or package in the source tree."""
    path = CORE / Path(*module.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def test_every_layer_names_a_real_module() -> None:
    phantoms = sorted(name for name in LAYERS if name != "__init__" and not exists(name))
    assert not phantoms, f"LAYERS names modules that do not exist: {phantoms}"


@pytest.mark.parametrize("module", sorted(TYPE_GRAPH))
def test_type_only_imports_exist_and_keep_to_the_layers(module: str) -> None:
    missing = sorted(m for m in TYPE_GRAPH[module] if m != "__init__" and not exists(m))
    assert not missing, f"accelkit.{module} imports {missing} for typing, which do not exist"
    upward = sorted(
        m
        for m in TYPE_GRAPH[module]
        if layer(m) > layer(module) and m.split(".")[0] not in HOOK_RECORDS
    )
    assert not upward, (
        f"accelkit.{module} (layer {layer(module)}) imports {upward} for typing from above it"
    )


def test_every_module_has_a_layer() -> None:
    for module in GRAPH:
        layer(module)


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_no_import_runs_up(module: str) -> None:
    upward = sorted(m for m in GRAPH[module] if layer(m) > layer(module))
    assert not upward, (
        f"accelkit.{module} (layer {layer(module)}) imports {upward} from above it; "
        "move the code to the layer it needs"
    )


def test_no_import_cycles() -> None:
    def within(module: str) -> set[str]:
        """Package-level edges: a subpackage counts as one node, as does the package face."""
        return {m for m in GRAPH.get(module, set()) if m in GRAPH}

    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        stack.append(module)
        for target in sorted(within(module)):
            if state.get(target) == 1:
                cycle = [*stack[stack.index(target) :], target]
                pytest.fail(f"import cycle: {' -> '.join(cycle)}")
            if target not in state:
                visit(target)
        stack.pop()
        state[module] = 2

    for module in sorted(GRAPH):
        if module not in state:
            visit(module)


def test_the_checker_sees_lazy_and_relative_imports() -> None:
    assert "registry" in GRAPH["pipeline"] and "host" in GRAPH["pipeline"]
    assert "snapshot" in GRAPH["cli._common"]  # imported inside a function
    assert "registry" in GRAPH["grant"]  # Grant.env resolves the default registry inside
    assert "grant" not in GRAPH["registry"]  # only under TYPE_CHECKING
    assert "grant" in TYPE_GRAPH["registry"]
    assert "registry" not in GRAPH["node"]  # the record loads no plugin machinery
