"""Property tests over every input a user or a machine can hand accelkit (issue 14, item 6).

Visibility variables of every family, vendor command output (binary, empty, truncated, huge,
JSON of the wrong types), sysfs and procfs contents, snapshot manifests, node and grant JSON,
request quantities, the ``ACCELKIT_*`` variables and the command line. Two properties each:
only the documented errors of :mod:`accelkit.errors` come out, each naming what was wrong; and
whatever detection makes of the input is a node that can be allocated over, whose grants write
an environment, and whose JSON reads back equal. Examples are kept few per test (the suite's
budget); hypothesis's database replays any failure it found before.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import unicodedata
from collections.abc import Iterator, Mapping
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any, Optional

import pytest
from accelkit import (
    AccelkitError,
    Allocator,
    FakeHost,
    Grant,
    InvalidData,
    InvalidRequest,
    Node,
    detect_node,
    validate_request,
)
from accelkit._settings import flag
from accelkit.cli import UNSHOWN, main
from accelkit.errors import ConfigurationError
from accelkit.host import load_snapshot
from accelkit.host._replay import MANIFEST
from accelkit.registry import Registry, variables_read
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

NODES = Path(__file__).resolve().parents[2] / "examples" / "nodes"
BUILTINS = Registry(autoload=False)
FEW = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

# -- what hostile input looks like ----------------------------------------------------------------
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats()
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
TOKEN = st.one_of(
    st.integers(0, 20).map(str),
    st.integers(0, 10**15).map(str),
    st.sampled_from(["09", "007", "-1", "1-3", "3-1", "0.1", "x:1", "²", "٣", "all", "none"]),
    st.sampled_from(["GPU-0", "MIG-1", "level_zero:0", "*", "gpu", "NoDevFiles", " 1 ", "a b"]),
    st.text(max_size=6),
)
VISIBILITY_VALUE = st.one_of(
    st.lists(TOKEN, max_size=6).map(",".join),
    st.lists(TOKEN, max_size=4).map(";".join),
    st.text(max_size=30),
)
OUTPUT = st.one_of(
    st.text(max_size=400),
    st.binary(max_size=200).map(lambda b: b.decode("latin-1")),
    JSON.map(json.dumps),
    st.just(""),
)


def every_variable() -> list[str]:
    return sorted({n for m in BUILTINS.managers() for n in variables_read(m)})


def recorded(node: str) -> dict[str, Any]:
    return dict(json.loads((NODES / node / MANIFEST).read_text()))


def replay(node: str, env: Mapping[str, str], commands: dict[Any, Any]) -> FakeHost:
    root = NODES / node / "root"
    return FakeHost(root=root if root.is_dir() else None, env=dict(env), commands=commands)


def commands_of(node: str) -> dict[Any, Any]:
    return {
        tuple(c["argv"]): (c.get("returncode", 0), c.get("stdout", ""), c.get("stderr", ""))
        for c in recorded(node)["commands"]
        if "error" not in c
    }


def assert_sound(node: Node) -> None:
    """What detection made can be allocated over, granted, written and read back."""
    allocator = Allocator(node, registry=BUILTINS)
    for resource in {d.resource_name for d in node.devices}:
        try:
            grant = allocator.acquire({resource: 1})
        except InvalidRequest:  # a family whose rule refuses 1 here (e.g. none of its blocks)
            continue
        if grant is not None:
            env = grant.env(base_env={}, registry=BUILTINS)
            assert all(v is None or not any(c.isspace() for c in v) for v in env.values())
            allocator.release(grant)
    assert Node.from_dict(json.loads(json.dumps(node.to_dict()))) == node


def detect_soundly(host: FakeHost) -> Optional[Node]:
    """Detection of a hostile host: a node that is sound, or a ConfigurationError."""
    try:
        node = detect_node(host, registry=BUILTINS)
    except ConfigurationError as error:
        assert str(error)
        return None
    assert_sound(node)
    return node


# -- visibility variables of every family ---------------------------------------------------------
@FEW
@given(
    node=st.sampled_from(sorted(p.name for p in NODES.iterdir() if p.is_dir())),
    env=st.dictionaries(st.sampled_from(every_variable()), VISIBILITY_VALUE, max_size=4),
)
def test_any_visibility_variables_give_a_sound_node(node: str, env: dict[str, str]) -> None:
    detect_soundly(replay(node, {**recorded(node)["env"], **env}, commands_of(node)))


@FEW
@given(env=st.dictionaries(st.sampled_from(every_variable()), VISIBILITY_VALUE, max_size=4))
def test_any_visibility_variables_make_logical_devices_that_are_sound(env: dict[str, str]) -> None:
    detect_soundly(FakeHost(env=env))


# -- vendor command output ------------------------------------------------------------------------
COMMAND_NODES = sorted(n for n in (p.name for p in NODES.iterdir()) if commands_of(n))


@FEW
@given(node=st.sampled_from(COMMAND_NODES), data=st.data())
def test_any_command_output_gives_a_sound_node(node: str, data: st.DataObject) -> None:
    commands = commands_of(node)
    argv = data.draw(st.sampled_from(sorted(commands)))
    code, stdout, stderr = commands[argv]
    garbled = data.draw(
        st.one_of(
            OUTPUT,
            st.integers(0, len(stdout)).map(lambda n: stdout[:n]),  # truncated
            st.integers(2, 300).map(lambda n: stdout * n),  # huge
            st.just(stdout.replace('"', "'")),  # JSON no more
        ),
        label="stdout",
    )
    commands[argv] = (data.draw(st.sampled_from([code, 1, -9])), garbled, stderr)
    detect_soundly(replay(node, recorded(node)["env"], commands))


# -- sysfs and procfs contents --------------------------------------------------------------------
@pytest.fixture(scope="module")
def tree_copies(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A private copy of each example node's file tree, for tests to garble and restore."""
    copies = {}
    for node in sorted(p.name for p in NODES.iterdir() if (p / "root").is_dir()):
        target = tmp_path_factory.mktemp(node) / "root"
        shutil.copytree(NODES / node / "root", target, symlinks=True)
        copies[node] = target
    return copies


@contextlib.contextmanager
def garbled(path: Path, content: bytes) -> Iterator[None]:
    """``path`` holds ``content`` for the block, then what it held before."""
    before = path.read_bytes()
    path.write_bytes(content)
    try:
        yield
    finally:
        path.write_bytes(before)


def files_of(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink())


FILE_CONTENT = st.one_of(
    st.binary(max_size=64),
    st.text(max_size=64).map(str.encode),
    st.sampled_from([b"", b"\x00", b"-1\n", b"0x\n", b"99999999999999999999\n", b"9" * 5000]),
)


@FEW
@given(data=st.data())
def test_any_sysfs_or_procfs_content_gives_a_sound_node(
    tree_copies: dict[str, Path], data: st.DataObject
) -> None:
    node = data.draw(st.sampled_from(sorted(tree_copies)), label="node")
    path = data.draw(st.sampled_from(files_of(tree_copies[node])), label="file")
    host = FakeHost(root=tree_copies[node], env=recorded(node)["env"], commands=commands_of(node))
    with garbled(path, data.draw(FILE_CONTENT, label="content")):
        detect_soundly(host)


# -- snapshot manifests ---------------------------------------------------------------------------
MANIFEST_VALUE = st.fixed_dictionaries(
    {"format": st.sampled_from(["accelkit-snapshot", "x"]), "version": st.sampled_from([1, 2])},
    optional={
        "env": JSON | st.dictionaries(st.sampled_from(every_variable()), VISIBILITY_VALUE),
        "commands": JSON
        | st.lists(
            st.fixed_dictionaries(
                {"argv": JSON | st.lists(st.text(max_size=5), min_size=1, max_size=3)},
                optional={"returncode": JSON, "stdout": JSON | OUTPUT, "error": JSON},
            ),
            max_size=3,
        ),
        "redacted": JSON,
    },
)


@FEW
@given(manifest=st.one_of(MANIFEST_VALUE.map(json.dumps), JSON.map(json.dumps), st.text()))
def test_any_snapshot_manifest_loads_or_is_invalid_data(tmp_path: Path, manifest: str) -> None:
    (tmp_path / MANIFEST).write_text(manifest)
    try:
        host = load_snapshot(tmp_path)
    except InvalidData as error:
        assert str(error)
        return
    detect_soundly(host)


# -- node and grant JSON --------------------------------------------------------------------------
def a_node() -> dict[str, Any]:
    return detect_node(
        replay("nvidia-h100-8gpu", {}, commands_of("nvidia-h100-8gpu")), registry=BUILTINS
    ).to_dict()


def mutate(data: Any, path: list[Any], value: Any) -> Any:
    """``data`` with the value at ``path`` (keys and indices) replaced by ``value``."""
    if not path:
        return value
    head, *rest = path
    if isinstance(data, dict) and head in data:
        return {**data, head: mutate(data[head], rest, value)}
    if isinstance(data, list) and isinstance(head, int) and 0 <= head < len(data):
        return [*data[:head], mutate(data[head], rest, value), *data[head + 1 :]]
    return data


def paths(data: Any, prefix: tuple[Any, ...] = ()) -> list[list[Any]]:
    """Every path into ``data``, the root included."""
    found = [list(prefix)]
    items = (
        data.items()
        if isinstance(data, dict)
        else enumerate(data)
        if isinstance(data, list)
        else ()
    )
    for key, value in items:
        found += paths(value, (*prefix, key))
    return found


NODE_JSON = a_node()
NODE_PATHS = paths(NODE_JSON)


@FEW
@given(path=st.sampled_from(NODE_PATHS), value=JSON)
def test_any_node_json_reads_back_or_is_invalid_data(path: list[Any], value: Any) -> None:
    try:
        node = Node.from_dict(mutate(NODE_JSON, path, value))
    except InvalidData as error:
        assert str(error)
        return
    try:
        Allocator(node, registry=BUILTINS).acquire({"GPU": 1})
    except AccelkitError as error:  # a node that contradicts itself says so
        assert str(error)


def a_grant() -> tuple[Node, dict[str, Any]]:
    node = Node.from_dict(NODE_JSON)
    grant = Allocator(node, registry=BUILTINS).acquire({"GPU": 2})
    assert grant is not None
    return node, grant.to_dict()


GRANT_NODE, GRANT_JSON = a_grant()


@FEW
@given(path=st.sampled_from(paths(GRANT_JSON)), value=JSON)
def test_any_grant_json_restores_or_is_a_documented_error(path: list[Any], value: Any) -> None:
    try:
        grant = Grant.from_dict(mutate(GRANT_JSON, path, value))
        Allocator(GRANT_NODE, registry=BUILTINS).restore([grant])
    except AccelkitError as error:
        assert str(error)


# -- request quantities ---------------------------------------------------------------------------
QUANTITY = st.one_of(
    st.booleans(),
    st.none(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.just(10**5000),
    st.floats(),
    st.fractions(),
    st.decimals(allow_nan=True, allow_infinity=True),
    st.sampled_from([Decimal("sNaN"), Decimal("1e999999999"), Fraction(10**400 + 1, 2)]),
    st.text(max_size=5),
    st.lists(st.integers(), max_size=2),
)


@FEW
@given(
    request=st.dictionaries(
        st.sampled_from(
            [
                "GPU",
                "TPU",
                "neuron_cores",
                "HPU",
                "NPU",
                "custom",
                "accelerator_type:H100",
                " GPU",
                "",
            ]
        ),
        QUANTITY,
        max_size=3,
    )
)
def test_any_request_is_valid_or_an_invalid_request(request: dict[str, Any]) -> None:
    node = Node.from_dict(NODE_JSON)
    for where in (None, node):
        try:
            validate_request(request, where, registry=BUILTINS)
        except InvalidRequest as error:
            assert str(error)
    try:
        Allocator(node, registry=BUILTINS).acquire(request)
    except InvalidRequest as error:
        assert str(error)


# -- the operator's variables ---------------------------------------------------------------------
@FEW
@given(
    override=st.one_of(JSON.map(json.dumps), st.text(max_size=30)),
    exclude=st.lists(
        st.text(max_size=12) | st.sampled_from(["nvidia:0", "nvidia:GPU-", ":"]), max_size=3
    ).map(",".join),
)
def test_any_operator_variables_give_a_sound_node_or_a_configuration_error(
    override: str, exclude: str
) -> None:
    env = {"ACCELKIT_OVERRIDE_RESOURCES": override, "ACCELKIT_EXCLUDE_DEVICES": exclude}
    detect_soundly(replay("nvidia-h100-8gpu", env, commands_of("nvidia-h100-8gpu")))


@FEW
@given(value=st.text(max_size=10))
def test_any_switch_value_is_read_or_a_configuration_error(value: str) -> None:
    try:
        flag({"ACCELKIT_DISABLE_PLUGIN_AUTOLOAD": value}, "ACCELKIT_DISABLE_PLUGIN_AUTOLOAD")
    except ConfigurationError as error:
        assert "ACCELKIT_DISABLE_PLUGIN_AUTOLOAD" in str(error)


# -- the command line -----------------------------------------------------------------------------
WORDS = st.one_of(
    st.sampled_from(
        ["ls", "env", "plugins", "snapshot", "check", "--json", "-v", "-r", "--override"]
    ),
    st.sampled_from(["--hide-others", "--label-prefix", "GPU=1", "GPU=0.5", "TPU=3", "GPU=1e999"]),
    st.sampled_from(["accelerator_type=H100", "GPU=", "=1", "GPU=-1", "GPU=nan", "x=1/0"]),
    st.text(max_size=8),
)


@FEW
@given(words=st.lists(WORDS, max_size=5))
def test_no_command_line_shows_a_traceback(
    capsys: pytest.CaptureFixture[str], words: list[str]
) -> None:
    if words and words[0] in ("snapshot", "check"):
        return  # snapshot writes to the machine's disk and check runs a whole suite
    argv = [*words, "--host", str(NODES / "nvidia-h100-8gpu")]
    try:
        code = main(argv)
    except SystemExit as stop:  # argparse: usage errors and --help
        code = stop.code if isinstance(stop.code, int) else 0
    _, err = capsys.readouterr()
    assert code in (0, 1, 2)
    assert "Traceback" not in err and "internal error" not in err
    assert not [ch for ch in err if ch != "\n" and unicodedata.category(ch) in UNSHOWN]
