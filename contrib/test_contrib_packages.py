"""The rules every contrib package keeps: what a vendor would publish, on the public contract.

Each package under ``contrib/`` is its own distribution (``accelkit-<name>``) whose plugin module
stays under 100 code lines, imports nothing of accelkit but ``accelkit`` and ``accelkit.detect``,
documents every function, writes its branches out, reads as a data sheet (manager class first,
hook last), declares contract version 2, registers its plugin and its fake-host builder as entry
points, ships a recorded node, README and tests, and is listed in accelkit's README and guide.
"""

from __future__ import annotations

import ast
import io
import json
import re
import tokenize
from importlib import metadata
from pathlib import Path

import accelkit
import pytest

CONTRIB = Path(__file__).resolve().parent
ROOT = CONTRIB.parent
PACKAGES = ("rbln", "furiosa", "metax", "tenstorrent", "cambricon", "mthreads")
PUBLIC = {"accelkit", "accelkit.detect"}


def code_lines(source: str) -> int:
    """Lines holding code: blank lines, comments and docstrings do not count."""
    docstrings: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and body:
            first = body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}
    seen: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in skip and token.type != tokenize.ENDMARKER:
            seen.update(range(token.start[0], token.end[0] + 1))
    return len(seen - docstrings)


def plugin(name: str) -> Path:
    """The plugin module of contrib package ``name``."""
    return CONTRIB / name / "src" / f"accelkit_{name}" / "__init__.py"


def modules(name: str) -> list[Path]:
    """Every module of contrib package ``name``."""
    return sorted((CONTRIB / name / "src" / f"accelkit_{name}").glob("*.py"))


@pytest.mark.parametrize("name", PACKAGES)
def test_the_plugin_stays_under_100_code_lines_without_formatter_escapes(name: str) -> None:
    assert code_lines(plugin(name).read_text()) < 100
    for path in modules(name):
        assert not re.search(r"#\s*fmt:\s*(skip|off)", path.read_text()), path


@pytest.mark.parametrize("name", PACKAGES)
def test_only_the_public_contract_and_toolkit_are_imported(name: str) -> None:
    for path in modules(name):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("accelkit"):
                assert node.module in PUBLIC or node.module == f"accelkit_{name}", (
                    f"{path.name}:{node.lineno} imports from {node.module}"
                )
            if isinstance(node, ast.Import):
                named = [a.name for a in node.names if a.name.startswith("accelkit")]
                assert not named, f"{path.name}:{node.lineno} imports {named}: use from-imports"


@pytest.mark.parametrize("name", PACKAGES)
def test_every_function_is_documented_and_writes_its_branches_out(name: str) -> None:
    for path in modules(name):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef) or node.name.startswith("test"):
                continue
            assert ast.get_docstring(node), f"{path.name}:{node.lineno} {node.name}: no docstring"
            if node.returns is not None and ast.unparse(node.returns) == "bool":
                continue  # `a and b` in a predicate is logic, not a value trick
            for inner in ast.walk(node):
                tricky = isinstance(inner, ast.Return) and isinstance(inner.value, ast.BoolOp)
                assert not tricky, f"{path.name}:{inner.lineno}: write the branch out"


@pytest.mark.parametrize("name", PACKAGES)
def test_the_plugin_reads_as_a_data_sheet_on_contract_version_2(name: str) -> None:
    tree = ast.parse(plugin(name).read_text())
    definitions = [n for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))]
    assert isinstance(definitions[0], ast.ClassDef) and definitions[0].name.endswith("Manager")
    assert definitions[-1].name == "accelkit_register_managers"
    manager = accelkit.Registry(autoload=True).get_manager(name)
    assert manager.api_version == accelkit.API_VERSION == 2
    assert type(manager).__module__ == f"accelkit_{name}"


@pytest.mark.parametrize("name", PACKAGES)
def test_the_distribution_registers_plugin_and_fake_hosts(name: str) -> None:
    distribution = metadata.distribution(f"accelkit-{name}")
    points = {(p.group, p.name): p.value for p in distribution.entry_points}
    assert points[("accelkit", name)] == f"accelkit_{name}"
    assert points[("accelkit.testing", name)] == f"accelkit_{name}.testing:make_host"
    assert any(r.split(";")[0].strip() == "accelkit" for r in distribution.requires or [])


@pytest.mark.parametrize("name", PACKAGES)
def test_the_package_ships_a_readme_a_recorded_node_and_its_tests(name: str) -> None:
    package = CONTRIB / name
    readme = (package / "README.md").read_text()
    for section in ("## Sources", "## Not confirmed"):
        assert section in readme, f"contrib/{name}/README.md has no {section!r} section"
    assert "experimental, community" in readme
    nodes = [p for p in (package / "nodes").iterdir() if p.is_dir()]
    assert len(nodes) == 1 and (nodes[0] / "snapshot.json").is_file()
    assert json.loads((nodes[0] / "snapshot.json").read_text())["format"] == "accelkit-snapshot"
    assert (package / "tests" / f"test_{name}.py").is_file()  # unique basenames for pytest


def test_accelkits_readme_and_guide_list_the_six() -> None:
    readme = (ROOT / "README.md").read_text()
    guide = (ROOT / "docs" / "plugin-authoring.md").read_text()
    for name in PACKAGES:
        assert f"(contrib/{name})" in readme, f"README.md does not link contrib/{name}"
        assert f"(../contrib/{name})" in guide, f"the plugin guide does not link contrib/{name}"
        assert f"-e ./contrib/{name}" in readme, f"the test command does not install {name}"
