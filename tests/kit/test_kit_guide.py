"""The plugin author's guide cannot drift: its code is the example plugin's code, and a new
accelerator written from the guide alone passes ``accelkit check`` and shows in ``accelkit ls``.

Blocks in ``docs/plugin-authoring.md`` follow a marker line:
``<!-- include: PATH -->`` (the block is that repository file, verbatim),
``<!-- output: accelkit ARGS [| head -N] -->`` (the block is what that command prints, or its
first N lines), ``<!-- doctest: TITLE -->`` (a Python session, run from the repository root) or
``<!-- snippet: TITLE -->`` (code a test below runs for what the guide says it does).
Run ``python3 tests/kit/test_kit_guide.py`` to rewrite the include and output blocks after
changing the example.
"""

from __future__ import annotations

import doctest
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from kit_support import BROKEN, EXAMPLE, GUIDE, REPO, _load_simple_toml, install_fake
from own_plugins import ours_only

BLOCK = re.compile(
    r"<!-- (?P<kind>include|output|doctest|snippet): (?P<what>[^>]+?) -->\n"
    r"```(?P<lang>\w*)\n(?P<body>.*?)```",
    re.DOTALL,
)
HEAD = re.compile(r"^(?P<command>.*?)(?: \| head -(?P<lines>\d+))?$")


def blocks(text: str, *kinds: str) -> list[re.Match[str]]:
    return [m for m in BLOCK.finditer(text) if not kinds or m["kind"] in kinds]


def block(kind: str, what: str) -> str:
    """The body of the guide's one block of ``kind`` for ``what``."""
    [match] = [m for m in blocks(GUIDE.read_text(), kind) if m["what"] == what]
    return match["body"]


def run_accelkit(
    args: str, path: tuple[Path, ...] = (), cwd: Path = REPO
) -> subprocess.CompletedProcess[str]:
    return run_python("-m", "accelkit.cli", *args.split(), path=path, cwd=cwd)


def run_python(
    *args: str, path: tuple[Path, ...] = (), cwd: Path = REPO
) -> subprocess.CompletedProcess[str]:
    """Python with ``path`` on its ``sys.path``, and the plugins of this repository and
    ``path``: none the machine happens to have beside them (what the guide shows is what a
    plugin author gets from these alone)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*map(str, path), env.get("PYTHONPATH", "")])
    for variable in ("ACCELKIT_DISABLE_PLUGINS", "ACCELKIT_DISABLE_PLUGIN_AUTOLOAD"):
        env.pop(variable, None)
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        env=ours_only(env),
        cwd=cwd,
        timeout=120,
    )


def expected(match: re.Match[str]) -> str:
    what = match["what"].strip()
    if match["kind"] == "include":
        return (REPO / what).read_text()
    command = HEAD.fullmatch(what)
    assert command is not None and command["command"].startswith("accelkit "), what
    output = run_accelkit(command["command"][len("accelkit ") :]).stdout
    if command["lines"] is None:
        return output
    return "".join(output.splitlines(keepends=True)[: int(command["lines"])])


def test_every_block_is_the_real_thing() -> None:
    found = blocks(GUIDE.read_text(), "include", "output")
    assert {m["what"] for m in found if m["kind"] == "include"} >= {
        "examples/accelkit-example/src/accelkit_example/__init__.py",
        "examples/accelkit-example/src/accelkit_example/fakes.py",
        "examples/accelkit-example/pyproject.toml",
        "tests/kit/test_kit_example.py",
    }
    for match in found:
        assert match["body"] == expected(match), (
            f"the block after `{match.group(0).splitlines()[0]}` in {GUIDE.name} differs from "
            "the real thing; run `python3 tests/kit/test_kit_guide.py` to update it"
        )


def test_the_plugin_and_its_test_are_short() -> None:
    text = GUIDE.read_text()
    sizes = {m["what"]: len(m["body"].splitlines()) for m in blocks(text, "include")}
    assert sizes["examples/accelkit-example/src/accelkit_example/__init__.py"] < 40
    assert sizes["tests/kit/test_kit_example.py"] < 20


RENAMES = (("accelkit_example", "accelkit_zeta"), ("accelkit-example", "accelkit-zeta"))
RENAMES += (("Acme", "Zeta"), ("ACME", "ZETA"), ("acme", "zeta"))


def from_the_guide(path: str, kind: str = "include") -> str:
    """The guide's block for ``path``, as a vendor of the "zeta" accelerator would adapt it."""
    text = block(kind, path)
    for old, new in RENAMES:
        text = text.replace(old, new)
    return text


@pytest.mark.parametrize(
    "title",
    [
        m["what"]
        for m in blocks(GUIDE.read_text(), "doctest")
        if not m["what"].startswith("toolkit ")  # one session: tests/kit/test_kit_toolkit.py
    ],
)
def test_the_python_sessions_run_as_shown(title: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    for variable in ("ACCELKIT_DISABLE_PLUGINS", "ACCELKIT_DISABLE_PLUGIN_AUTOLOAD"):
        monkeypatch.delenv(variable, raising=False)
    test = doctest.DocTestParser().get_doctest(block("doctest", title), {}, title, str(GUIDE), 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    messages: list[str] = []
    runner.run(test, out=messages.append)
    assert runner.failures == 0, "".join(messages)
    assert len(test.examples) > 3


def test_the_audit_fixture_snippet_passes(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_audit=block("snippet", "audit fixture"))
    result = pytester.runpytest_subprocess("-p", "accelkit.testing", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_the_example_node_is_what_the_fake_node_snippet_records(tmp_path: Path) -> None:
    (tmp_path / "make_node.py").write_text(block("snippet", "fake node"))
    made = run_python("make_node.py", cwd=tmp_path)
    assert made.returncode == 0, made.stderr

    def tree(base: Path) -> dict[str, str]:
        return {str(p.relative_to(base)): p.read_text() for p in base.rglob("*") if p.is_file()}

    assert tree(tmp_path / "node" / "root") == tree(EXAMPLE / "node" / "root")


def test_a_built_in_replaced_as_the_guide_shows(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "official_nvidia.py").write_text(block("snippet", "replace a built-in"))
    site = install_fake(
        "[project]\nname = 'nvidia-official'\nversion = '2.0'\ndependencies = ['accelkit']\n"
        "[project.entry-points.accelkit]\nnvidia-official = 'official_nvidia'\n",
        tmp_path / "site",
    )
    listed = run_accelkit("plugins --json", (site, source))
    assert listed.returncode == 0, listed.stdout + listed.stderr
    status = {p["name"]: (p["status"], p.get("error")) for p in json.loads(listed.stdout)}
    assert status["nvidia"][0] == "replaced"
    assert "replaced by plugin 'nvidia-official' (nvidia-official 2.0)" in str(status["nvidia"])
    assert status["nvidia-official"][0] == "ok"
    checked = run_accelkit("check nvidia", (site, source))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.startswith(
        "accelkit check nvidia: OfficialNvidiaManager, plugin 'nvidia-official'"
    )


def test_a_new_accelerator_written_from_the_guide_works(tmp_path: Path) -> None:
    """The issue's "done means": a package written from the guide alone (the ACME blocks, renamed
    for a "zeta" accelerator) passes ``accelkit check``, shows in ``accelkit ls --host``, and
    passes its own conformance test, with no change to accelkit."""
    package = tmp_path / "src" / "accelkit_zeta"
    package.mkdir(parents=True)
    example = "examples/accelkit-example/"
    (package / "__init__.py").write_text(
        from_the_guide(example + "src/accelkit_example/__init__.py")
    )
    (package / "fakes.py").write_text(from_the_guide(example + "src/accelkit_example/fakes.py"))
    # `pip install .` of the guide's pyproject.toml, minus the build: its metadata on a path
    site = install_fake(from_the_guide(example + "pyproject.toml"), tmp_path / "site")
    path = (site, tmp_path / "src")

    checked = run_accelkit("check zeta", path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "plugin 'zeta' (accelkit-zeta 0.1.0)" in checked.stdout
    assert "PASSED: 27 passed" in checked.stdout

    (tmp_path / "make_node.py").write_text(from_the_guide("fake node", "snippet"))
    made = run_python("make_node.py", path=path, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    listed = run_accelkit("ls --host node", path, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "zeta    ZETA      0   ZETA-Rocket-X1  ZETA Rocket X1" in listed.stdout
    assert "  ZETA = 2\n" in listed.stdout
    node = json.loads(run_accelkit("ls --host node --json", path, cwd=tmp_path).stdout)
    assert [(d["family"], d["id"]) for d in node["devices"]] == [("zeta", "0"), ("zeta", "1")]
    assert node["resources"]["ZETA"] == 2.0

    (tmp_path / "test_zeta.py").write_text(from_the_guide("tests/kit/test_kit_example.py"))
    tested = run_python(
        "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_zeta.py", path=path, cwd=tmp_path
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "27 passed" in tested.stdout


def test_the_fallback_toml_reader_reads_the_examples_as_tomllib_does() -> None:
    # Before Python 3.11 without tomli, the tests read the examples' pyproject.toml with it.
    tomllib = pytest.importorskip("tomllib")
    for pyproject in (EXAMPLE / "pyproject.toml", BROKEN / "pyproject.toml"):
        text = pyproject.read_text()
        assert _load_simple_toml(text) == tomllib.loads(text), pyproject


def rewrite() -> None:
    """Rewrite every marked block of the guide from the real files and commands."""
    text = GUIDE.read_text()
    for match in reversed(blocks(text, "include", "output")):
        start, end = match.span("body")
        text = text[:start] + expected(match) + text[end:]
    GUIDE.write_text(text)


if __name__ == "__main__":
    rewrite()
