"""Standing rules of the project: plugin line budget, a cheap import, CI running the README."""

from __future__ import annotations

import ast
import io
import json
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUILTINS = ("nvidia", "amd", "intel", "neuron", "tpu", "gaudi", "ascend")


def code_lines(source: str) -> int:
    """Lines holding code: blank lines, comments and docstrings do not count."""
    docstrings: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if (
            isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            docstrings.update(range(body[0].lineno, (body[0].end_lineno or body[0].lineno) + 1))
    seen: set[int] = set()
    skip = {
        tokenize.COMMENT,
        tokenize.NL,
        tokenize.NEWLINE,
        tokenize.INDENT,
        tokenize.DEDENT,
        tokenize.ENDMARKER,
    }
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in skip:
            seen.update(n for n in range(token.start[0], token.end[0] + 1) if n not in docstrings)
    return len(seen)


def test_code_line_counter_ignores_docstrings_comments_and_blanks() -> None:
    source = (
        '"""Doc\nstring."""\n\n# comment\nx = 1\n\ndef f():\n    """Doc."""\n    return (1,\n  2)\n'
    )
    assert code_lines(source) == 4


@pytest.mark.parametrize("vendor", BUILTINS)
def test_each_builtin_plugin_stays_under_100_code_lines(vendor: str) -> None:
    files = sorted((ROOT / "plugins" / vendor).rglob("*.py"))
    assert files, f"plugins/{vendor} has no module"
    hidden = [f.name for f in files if re.search(r"#\s*fmt:\s*(skip|off)", f.read_text())]
    assert not hidden, f"plugins/{vendor} hides code from the formatter in {hidden}"
    total = sum(code_lines(f.read_text()) for f in files)
    assert total < 100, (
        f"plugins/{vendor} has {total} code lines; move shared mechanics to the core"
    )


def test_import_accelkit_loads_no_plugin_vendor_library_or_entry_point() -> None:
    probe = """
import importlib.metadata as md, json, sys
def refuse(*a, **k):
    raise AssertionError("entry points scanned at import")
md.entry_points = refuse
import accelkit
accelkit.Device, accelkit.FakeHost, accelkit.InvalidRequest, accelkit.AcceleratorManager
print(json.dumps(sorted(sys.modules)))
"""
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    loaded = set(json.loads(out))
    forbidden = {"accelkit.registry", "pluggy", "pynvml", "amdsmi", "dpctl", "acl", "torch", "jax"}
    assert not loaded & forbidden
    assert not any(m.startswith("accelkit_plugins") for m in loaded)


def readme_test_command() -> str:
    text = (ROOT / "README.md").read_text()
    marker = "<!-- test-command -->"
    assert marker in text, "README.md must mark its test command with <!-- test-command -->"
    block = text.split(marker, 1)[1].split("```", 2)[1]
    lines = [line for line in block.splitlines()[1:] if line.strip()]
    assert len(lines) == 1, f"the README's test command must be one line, got {lines}"
    return lines[0].strip()


def test_ci_runs_exactly_the_readme_test_command() -> None:
    command = readme_test_command()
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert command in [line.strip() for line in ci]


def test_quality_gates_ruff_and_mypy_are_clean() -> None:
    for argv in (
        ["ruff", "check", "."],
        ["ruff", "format", "--check", "."],
        [sys.executable, "-m", "mypy"],
    ):
        result = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
        assert result.returncode == 0, f"{' '.join(argv)}:\n{result.stdout}{result.stderr}"


def readme_python_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return [
        block.split("\n", 1)[1] for block in text.split("```")[1::2] if block.startswith("python")
    ]


def test_readme_plugin_detects_and_grants_on_a_fake_host(tmp_path: Path) -> None:
    import accelkit

    plugin = next(b for b in readme_python_blocks() if "accelkit_register_managers" in b)
    namespace: dict[str, object] = {}
    exec(compile(plugin, "README.md", "exec"), namespace)
    (tmp_path / "dev").mkdir()
    for name in ("acme0", "acme1", "acme2", "acme10", "acme_ctl"):
        (tmp_path / "dev" / name).touch()
    manager_class = namespace["AcmeManager"]
    assert isinstance(manager_class, type)
    devices = manager_class().detect(accelkit.FakeHost(root=tmp_path))
    assert [(d.id, d.index, d.source) for d in devices] == [
        ("0", 0, "devfs"),
        ("1", 1, "devfs"),
        ("2", 2, "devfs"),
        ("10", 10, "devfs"),
    ]


def test_readme_api_tour_runs_on_a_logical_node() -> None:
    tour = next(b for b in readme_python_blocks() if "accelkit.Allocator" in b)
    tour = tour.replace(
        "detect_node()", 'detect_node(host=accelkit.FakeHost(), overrides={"GPU": 2})'
    )
    namespace: dict[str, object] = {}
    exec(compile(tour, "README.md", "exec"), namespace)
    grant = namespace["grant"]
    assert grant.ids == {"GPU": ["0"]}  # type: ignore[attr-defined]
    assert grant.env()["CUDA_VISIBLE_DEVICES"] == "0"  # type: ignore[attr-defined]
