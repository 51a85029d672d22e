"""The scheduler API page is the API: every name in ``accelkit.__all__`` and the binding faces
DESIGN names, no top-level name beyond them, each signature as the code has it."""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import inspect
import re
from pathlib import Path
from typing import Any

import accelkit
import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "scheduler-api.md"
ENTRY = re.compile(
    r"^#{3,4} `(?P<path>accelkit(?:\.[A-Za-z_]\w*)+)(?:\((?P<params>.*)\))?`$", re.MULTILINE
)
FACES = (
    "accelkit.ledger.Ledger",
    "accelkit.pool.AcceleratorPool",
    *(f"accelkit.exports.{name}" for name in ("to_ray", "to_dask", "to_gres", "to_nfd")),
    "accelkit.scaling.ScalingConfig",
    "accelkit.scaling.tpu_slice",
    "accelkit.runtime.devices",
    "accelkit.integrations.dask.LocalAcceleratorCluster",
    "accelkit.integrations.dask.worker_slots",
    "accelkit.integrations.ray.remote",
)
"""The names DESIGN binds outside ``accelkit.__all__``, which schedulers import by path."""


def documented() -> dict[str, str | None]:
    """Each entry's dotted path and its parameters as written (None: written without)."""
    return {m["path"]: m["params"] for m in ENTRY.finditer(PAGE.read_text())}


def resolve(path: str) -> tuple[Any, bool]:
    """The object at ``path``, and whether it is a method looked up on its class (whose
    signature then starts with ``self``, which the page leaves out)."""
    first, *rest = path.split(".")
    obj: Any = importlib.import_module(first)
    method = False
    for name in rest:
        inner = f"{obj.__name__}.{name}" if hasattr(obj, "__path__") else None
        if inner and importlib.util.find_spec(inner) is not None:
            obj = importlib.import_module(inner)
            continue
        method = inspect.isclass(obj) and inspect.isfunction(inspect.getattr_static(obj, name))
        obj = getattr(obj, name)
    return obj, method


def default(owner: Any, parameter: inspect.Parameter) -> str:
    """A default as the page writes it: public constants by name, factories by their value."""
    value = parameter.default
    if repr(value) == "<factory>" and dataclasses.is_dataclass(owner):
        field = next(f for f in dataclasses.fields(owner) if f.name == parameter.name)
        return repr(field.default_factory())
    if isinstance(value, type):
        return value.__name__
    if not isinstance(value, (str, int, float, tuple)) and value is not None:
        named = [n for n in accelkit.__all__ if getattr(accelkit, n) is value]
        if named:
            return named[0]
    return repr(value)


def shown(obj: Any, method: bool) -> str:
    """The signature as the page writes it: no annotations, ``/`` and ``*`` where they are."""
    parameters = list(inspect.signature(obj).parameters.values())[1 if method else 0 :]
    words: list[str] = []
    star = False
    for i, p in enumerate(parameters):
        if p.kind is p.VAR_POSITIONAL:
            star = True
            words.append(f"*{p.name}")
            continue
        if p.kind is p.VAR_KEYWORD:
            words.append(f"**{p.name}")
            continue
        if p.kind is p.KEYWORD_ONLY and not star:
            star = True
            words.append("*")
        words.append(p.name if p.default is p.empty else f"{p.name}={default(obj, p)}")
        following = parameters[i + 1].kind if i + 1 < len(parameters) else None
        if p.kind is p.POSITIONAL_ONLY and following is not p.POSITIONAL_ONLY:
            words.append("/")
    return ", ".join(words)


def test_the_page_documents_every_public_name() -> None:
    top = {path.split(".")[1] for path in documented() if path.count(".") == 1}
    missing = sorted(set(accelkit.__all__) - top)
    assert not missing, f"docs/scheduler-api.md does not document accelkit.{missing}"


def test_the_page_documents_no_top_level_name_outside_all() -> None:
    """A top-level entry is a name of ``accelkit.__all__`` (or one of its members), or lives
    in a submodule: anything else would teach schedulers a name that is not public."""
    stray = sorted(
        path
        for path in documented()
        if path.split(".")[1] not in accelkit.__all__
        and importlib.util.find_spec(f"accelkit.{path.split('.')[1]}") is None
    )
    assert not stray, f"docs/scheduler-api.md documents names not in accelkit.__all__: {stray}"


def test_the_page_documents_the_binding_faces() -> None:
    missing = [face for face in FACES if face not in documented()]
    assert not missing, f"docs/scheduler-api.md does not document {missing}"


@pytest.mark.parametrize("path", sorted(documented()))
def test_each_documented_signature_is_the_real_one(path: str) -> None:
    try:
        obj, method = resolve(path)
    except ModuleNotFoundError as error:
        if (error.name or "").startswith("accelkit"):
            raise
        pytest.skip(f"{path} needs {error.name}, which is not installed")
    params = documented()[path]
    if inspect.isfunction(obj) or inspect.ismethod(obj):
        assert params is not None, f"{path} is a function; document it with its parameters"
    if params is None:
        return
    real = shown(obj, method)
    assert params == real, f"the page documents {path}({params}); the code is ({real})"


def test_the_readme_links_the_page() -> None:
    assert "](docs/scheduler-api.md)" in (ROOT / "README.md").read_text()
