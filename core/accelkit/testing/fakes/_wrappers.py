"""What the C library emulators share: a fresh copy of a vendor's real Python wrapper, and
the ctypes mechanics of answering it as its C library would.

Each emulated library gets its own copy of the wrapper, executed from its source under a private
module name, so one test's emulation never reaches another test and several releases of a wrapper
can be loaded side by side. The copy is in ``sys.modules`` only while it executes (pynvml looks
itself up there to build its exception classes; a package's relative imports need it); then
``sys.modules`` is restored exactly, so ``import pynvml`` anywhere else is unaffected.
"""

from __future__ import annotations

import collections
import ctypes
import importlib.util
import itertools
import os
import pathlib
import sys
from types import ModuleType
from typing import Any, Callable, Optional, Union

__all__ = ["CountedFunction", "failing", "fill", "load_fresh", "target"]

_COPIES = itertools.count()

PathLike = Union[str, "os.PathLike[str]"]
"""A file or directory path, as text or a path object."""


def load_fresh(name: str, distribution: str, location: Optional[PathLike] = None) -> ModuleType:
    """A new copy of module ``name`` from ``location``: a ``.py`` file, or a package directory
    (its ``__init__.py`` and relative imports), executed under a private name. ``location`` None:
    the installed copy, found without importing it (``ImportError`` naming ``distribution``
    when it is not installed).

    ``sys.modules`` is as before once this returns, whether executing succeeded or raised.
    """
    path = _installed(name, distribution) if location is None else pathlib.Path(location)
    private = f"_accelkit_emulated_{name}_{next(_COPIES)}"
    search: Optional[list[str]] = None
    if path.is_dir():
        path, search = path / "__init__.py", [os.fspath(path)]
    if not path.is_file():
        raise FileNotFoundError(f"no {name} source at {os.fspath(path)!r}")
    spec = importlib.util.spec_from_file_location(private, path, submodule_search_locations=search)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {name} from {os.fspath(path)!r}")
    module = importlib.util.module_from_spec(spec)
    saved = dict(sys.modules)
    sys.modules[private] = module
    try:
        spec.loader.exec_module(module)
    finally:
        _restore(saved)
    return module


def _installed(module: str, distribution: str) -> pathlib.Path:
    """Where the installed ``module`` lives: its ``.py`` file or its package directory."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ImportError(
            f"{module} is not installed: `pip install {distribution}` (the test extra has it), "
            "or pass the location of a downloaded copy"
        )
    origin = pathlib.Path(spec.origin)
    return origin.parent if spec.submodule_search_locations else origin


def _restore(saved: dict[str, ModuleType]) -> None:
    """Put ``sys.modules`` back as ``saved`` holds it: new entries out, replaced ones back."""
    for key in set(sys.modules) - set(saved):
        del sys.modules[key]
    for key, module in saved.items():
        if sys.modules.get(key) is not module:
            sys.modules[key] = module


class CountedFunction:
    """An emulated C function as a wrapper holds it: callable, counted by its C name in
    ``calls``, with the ``restype``/``argtypes`` attributes wrappers set on ctypes functions."""

    def __init__(
        self, name: str, function: Callable[..., Any], calls: collections.Counter[str]
    ) -> None:
        self.name, self.function, self.calls = name, function, calls
        self.restype: Any = ctypes.c_int
        self.argtypes: Any = None

    def __call__(self, *args: Any) -> Any:
        self.calls[self.name] += 1
        return self.function(*args)


def target(argument: Any) -> Any:
    """What a pointer argument points at: the wrapper passes ``byref(x)``, the C side fills x."""
    return getattr(argument, "_obj", argument)


def fill(structure: Any, **values: Any) -> None:
    """Set the fields of a ctypes structure that this release of the wrapper declares (fields
    come and go between releases); text is stored as the C library stores it, in bytes."""
    declared = {field[0] for field in structure._fields_}
    for name, value in values.items():
        if name in declared:
            setattr(structure, name, value.encode() if isinstance(value, str) else value)


def failing(code: int) -> Callable[..., int]:
    """A C function that answers ``code`` whatever it is asked (a test's injected failure)."""

    def answer(*args: object) -> int:
        return code

    return answer
