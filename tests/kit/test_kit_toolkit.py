"""The guide's reference of the detection toolkit is the toolkit: the same names as
``accelkit.detect.__all__``, the same signatures, and examples that run as shown."""

from __future__ import annotations

import doctest
import inspect
import re

import accelkit.detect
import pytest
from kit_support import GUIDE

SECTION = "## 10. The detection toolkit: `accelkit.detect`"
ENTRY = re.compile(r"^#### `(?P<name>[A-Za-z_]+)(?:\((?P<params>.*)\))?`$", re.MULTILINE)


def section() -> str:
    text = GUIDE.read_text()
    assert SECTION in text, f"the guide has no section {SECTION!r}"
    body = text.split(SECTION, 1)[1]
    return body.split("\n## ", 1)[0]


def documented() -> dict[str, str | None]:
    return {m["name"]: m["params"] for m in ENTRY.finditer(section())}


def shown(parameter: inspect.Parameter) -> str:
    """A parameter as the guide writes it: no annotations, defaults as code."""
    prefix = {parameter.VAR_POSITIONAL: "*", parameter.VAR_KEYWORD: "**"}.get(parameter.kind, "")
    if parameter.default is parameter.empty:
        return prefix + parameter.name
    default = parameter.default
    value = default.__name__ if isinstance(default, type) else repr(default)
    return f"{parameter.name}={value}"


def test_the_reference_lists_exactly_the_public_toolkit() -> None:
    assert sorted(documented()) == sorted(accelkit.detect.__all__)


@pytest.mark.parametrize("name", sorted(accelkit.detect.__all__))
def test_each_documented_signature_is_the_real_one(name: str) -> None:
    obj = getattr(accelkit.detect, name)
    params = documented()[name]
    if not inspect.isfunction(obj):
        assert params is None, f"{name} is not a function; document it without parameters"
        return
    real = ", ".join(shown(p) for p in inspect.signature(obj).parameters.values())
    assert params == real, f"the guide documents {name}({params}); the code is {name}({real})"


def test_every_function_has_an_example_and_the_examples_run() -> None:
    blocks = re.findall(
        r"<!-- doctest: toolkit (?P<name>[\w-]+) -->\n```python\n(?P<body>.*?)```", section(), re.S
    )
    names = {name for name, _ in blocks}
    functions = {
        n for n in accelkit.detect.__all__ if inspect.isfunction(getattr(accelkit.detect, n))
    }
    assert functions <= names, f"no example for {sorted(functions - names)}"
    session = "".join(body for _, body in blocks)
    test = doctest.DocTestParser().get_doctest(session, {}, "toolkit", str(GUIDE), 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    assert runner.failures == 0, "the toolkit examples do not run as shown (see above)"
