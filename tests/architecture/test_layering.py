"""The core's stages (DESIGN "Layout"): each module imports only from its own stage or below, and
no imports run in a circle. No module is an exception.

The stages, in the order data flows: the contract (records, errors, quantities, the manager and
its hooks, the standard-library helpers they share), then ``host`` -> ``detect`` -> ``registry``
-> ``node`` -> ``schedule`` (with ``runtime``, ``scaling`` and ``exports``, which read nodes and
grants) -> ``ledger`` -> ``pool`` -> the faces (``cli``, ``integrations``, the conformance kit
``testing``, and the package itself). Imports inside functions count as much as those at the top.

Imports under ``if TYPE_CHECKING:`` create no dependency (they never run), so they are not
layered; each must still name a module that exists. That is how the hook contract names the
records it passes to plugins (``Node``, ``Grant``) without importing them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[2] / "core" / "accelkit"

STAGES = (
    "contract",
    "host",
    "detect",
    "registry",
    "node",
    "schedule",
    "ledger",
    "pool",
    "faces",
)
"""DESIGN's stage order; a module may import from its own stage and the ones before it."""

CONTRACT = {
    # what plugins and every stage share: records, errors, rules as data, the manager, its hooks
    "errors",
    "device",
    "diagnostics",
    "quantities",
    "policy",
    "manager",
    "hookspecs",
    # standard-library helpers beneath them
    "_visibility",
    "_settings",
    "_distributions",
    "_json",
    "_faults",
    "_shown",
    "_stdout",
    "_lazy",
    "_version",
}
BESIDE = {
    "runtime": "schedule",  # a worker's view of its grant
    "scaling": "schedule",  # training plans: requests for many workers
    "exports": "schedule",  # a node in the engines' formats
    "cli": "faces",
    "integrations": "faces",
    "testing": "faces",
    "__init__": "faces",
    "__main__": "faces",  # python -m accelkit: the command
}
"""Modules that are not a stage of their own, and the stage they sit in."""


def module_name(path: Path) -> str:
    parts = path.relative_to(CORE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts) or "__init__"


def stage(module: str) -> str:
    """The stage of ``accelkit.<module>``."""
    top = module.split(".")[0]
    if top in CONTRACT:
        return "contract"
    if top in STAGES:
        return top
    assert top in BESIDE, f"accelkit.{module} has no stage: add it to BESIDE in {__file__}"
    return BESIDE[top]


def layer(module: str) -> int:
    """The position of the module's stage in :data:`STAGES`."""
    return STAGES.index(stage(module))


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


def exists(module: str) -> bool:
    """Whether ``accelkit.<module>`` is a module or package in the source tree."""
    path = CORE / Path(*module.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


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
        elif isinstance(node, ast.ImportFrom) and node.module == "accelkit":
            # ``from accelkit import hookspecs`` imports a submodule, not the package face
            for alias in node.names:
                found.add(alias.name if exists(alias.name) else "__init__")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
            for name in names:
                if name and (name == "accelkit" or name.startswith("accelkit.")):
                    found.add(name.partition(".")[2] or "__init__")
    return {m for m in found if m and m != here}


GRAPH = {module_name(p): imports(p) for p in sorted(CORE.rglob("*.py"))}
TYPE_GRAPH = {module_name(p): imports(p, type_only=True) for p in sorted(CORE.rglob("*.py"))}


def test_every_named_module_is_real() -> None:
    phantoms = sorted(
        name for name in [*CONTRACT, *BESIDE] if name != "__init__" and not exists(name)
    )
    assert not phantoms, f"the stage table names modules that do not exist: {phantoms}"


def test_the_stages_are_packages() -> None:
    assert all((CORE / name / "__init__.py").exists() for name in STAGES[1:-1])


@pytest.mark.parametrize("module", sorted(TYPE_GRAPH))
def test_type_only_imports_exist(module: str) -> None:
    missing = sorted(m for m in TYPE_GRAPH[module] if m != "__init__" and not exists(m))
    assert not missing, f"accelkit.{module} imports {missing} for typing, which do not exist"


def test_every_module_has_a_layer() -> None:
    for module in GRAPH:
        layer(module)


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_no_import_runs_up(module: str) -> None:
    upward = sorted(m for m in GRAPH[module] if layer(m) > layer(module))
    assert not upward, (
        f"accelkit.{module} (stage {stage(module)}) imports {upward}, from later stages; "
        "move the code to the stage it needs"
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


def test_the_checker_sees_imports_inside_functions_and_not_type_only_ones() -> None:
    assert {"registry", "host"} <= {m.split(".")[0] for m in GRAPH["node._detect"]}
    assert "host" in GRAPH["cli._common"]  # imported inside a function
    assert "registry" in GRAPH["schedule._worker_env"]  # resolves the default registry inside
    assert not any(m.startswith("schedule") for m in GRAPH["registry"])  # TYPE_CHECKING only
    assert "schedule._grant" in TYPE_GRAPH["registry"]
    assert "registry" not in GRAPH["node._record"]  # the record loads no plugin machinery


def test_the_pool_child_imports_only_the_standard_library() -> None:
    """``python -m accelkit.pool._child`` runs before each call's module: nothing of accelkit may
    load there but the lazy faces it passes through."""
    assert GRAPH["pool._child"] == set()
    assert GRAPH["pool"] <= {"_lazy"}


def test_no_core_module_is_over_500_lines() -> None:
    """DESIGN's layout: a module that outgrows 500 lines is doing more than one job; split it."""
    long = {
        module_name(p): n
        for p in CORE.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > 500
    }
    assert not long, f"modules over 500 lines: {long}"
