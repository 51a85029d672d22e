"""The plugin author's guide cannot drift: its code is the example plugin's code, and a new
accelerator written from the guide alone passes ``accelkit check`` and shows in ``accelkit ls``.

Blocks in ``docs/plugin-authoring.md`` follow a marker line:
``<!-- include: PATH -->`` (the block is that repository file, verbatim) or
``<!-- output: accelkit ARGS -->`` (the block is what that command prints).
Run ``python3 tests/kit/test_kit_guide.py`` to rewrite the blocks after changing the example.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from kit_support import GUIDE, REPO, write_distribution

BLOCK = re.compile(
    r"<!-- (?P<kind>include|output): (?P<what>[^>]+?) -->\n```(?P<lang>\w*)\n(?P<body>.*?)```",
    re.DOTALL,
)


def blocks(text: str) -> list[re.Match[str]]:
    return list(BLOCK.finditer(text))


def run_accelkit(args: str, path: tuple[Path, ...] = ()) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*map(str, path), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "accelkit.cli", *args.split()],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=120,
    )


def expected(match: re.Match[str]) -> str:
    what = match["what"].strip()
    if match["kind"] == "include":
        return (REPO / what).read_text()
    assert what.startswith("accelkit "), what
    return run_accelkit(what[len("accelkit ") :]).stdout


def test_every_block_is_the_real_thing() -> None:
    found = blocks(GUIDE.read_text())
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
    sizes = {m["what"]: len(m["body"].splitlines()) for m in blocks(text)}
    assert sizes["examples/accelkit-example/src/accelkit_example/__init__.py"] < 100
    assert sizes["tests/kit/test_kit_example.py"] < 20


RENAMES = (("accelkit_example", "accelkit_zeta"), ("accelkit-example", "accelkit-zeta"))
RENAMES += (("Acme", "Zeta"), ("ACME", "ZETA"), ("acme", "zeta"))


def from_the_guide(path: str) -> str:
    """The guide's block for ``path``, as a vendor of the "zeta" accelerator would adapt it."""
    [match] = [m for m in blocks(GUIDE.read_text()) if m["what"] == path]
    text = match["body"]
    for old, new in RENAMES:
        text = text.replace(old, new)
    return text


def test_a_new_accelerator_written_from_the_guide_works(tmp_path: Path) -> None:
    tomllib = pytest.importorskip("tomllib")
    package = tmp_path / "src" / "accelkit_zeta"
    package.mkdir(parents=True)
    example = "examples/accelkit-example/"
    (package / "__init__.py").write_text(
        from_the_guide(example + "src/accelkit_example/__init__.py")
    )
    (package / "fakes.py").write_text(from_the_guide(example + "src/accelkit_example/fakes.py"))
    project = tomllib.loads(from_the_guide(example + "pyproject.toml"))["project"]
    site = write_distribution(
        tmp_path / "site",
        project["name"],
        project["version"],
        project["entry-points"],
        tuple(project["dependencies"]),
    )
    path = (site, tmp_path / "src")

    checked = run_accelkit("check zeta", path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "plugin 'zeta' (accelkit-zeta 0.1.0)" in checked.stdout

    snapshot = tmp_path / "node"
    (snapshot / "root").mkdir(parents=True)
    make_host = "from pathlib import Path; from accelkit_zeta.fakes import make_host; "
    subprocess.run(
        [sys.executable, "-c", make_host + f"make_host(2, Path({str(snapshot / 'root')!r}))"],
        env={**os.environ, "PYTHONPATH": str(tmp_path / "src")},
        check=True,
    )
    manifest = {"format": "accelkit-snapshot", "version": 1, "env": {}, "commands": []}
    (snapshot / "snapshot.json").write_text(json.dumps(manifest))
    listed = run_accelkit(f"ls --host {snapshot} --json", path)
    assert listed.returncode == 0, listed.stderr
    node = json.loads(listed.stdout)
    assert [(d["family"], d["id"]) for d in node["devices"]] == [("zeta", "0"), ("zeta", "1")]
    assert node["resources"]["ZETA"] == 2.0

    (tmp_path / "test_zeta.py").write_text(from_the_guide("tests/kit/test_kit_example.py"))
    tested = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            str(tmp_path / "test_zeta.py"),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(map(str, path))},
        cwd=tmp_path,
        timeout=120,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr


def rewrite() -> None:
    """Rewrite every marked block of the guide from the real files and commands."""
    text = GUIDE.read_text()
    for match in reversed(blocks(text)):
        start, end = match.span("body")
        text = text[:start] + expected(match) + text[end:]
    GUIDE.write_text(text)


if __name__ == "__main__":
    rewrite()
