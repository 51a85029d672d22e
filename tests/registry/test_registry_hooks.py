"""The typed hook facades: each plugin called alone, results merged in order, failures warned."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
from accelkit import Device, FakeHost, Grant, Node, detect_node, hookspecs, registry
from fake_dists import FakeSite, manager_module

LABELS = """
from accelkit import hookimpl

@hookimpl{options}
def accelkit_node_labels(node):
    return {result}
"""

WORKER_ENV = """
from accelkit import hookimpl

@hookimpl
def accelkit_worker_env(grant, env):
    return {result}
"""
WORKER_ENV_MANAGERS = WORKER_ENV.replace("(grant, env)", "(grant, env, managers)")

TESTS = Path(__file__).resolve().parents[1]

GRANT = Grant(0, {}, [])
"""The facades pass the grant through untouched; hints (which reads it) is disabled here."""


@pytest.fixture(autouse=True)
def without_hints(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACCELKIT_DISABLE_PLUGINS", "hints")


def add_hook(site: FakeSite, name: str, template: str, result: str, options: str = "") -> None:
    module = f"{name.replace('-', '_')}_hooks"
    source = template.format(result=result, options=options)
    site.add(f"{name}-dist", {name: module}, {module: source})


def test_node_labels_merge_in_pluggy_call_order_and_never_override(site: FakeSite) -> None:
    # pluggy calls the last registered plugin first (entry points load sorted by name)
    add_hook(site, "a-site", LABELS, "{'site/rack': 'r1', 'zone': 'mine'}")
    add_hook(site, "b-site", LABELS, "{'site/rack': 'r2', 'site/row': '7'}")
    add_hook(site, "c-site", LABELS, "None")
    node = Node(labels={"zone": "node's own"})
    assert registry.default_registry().node_labels(node) == {"site/rack": "r2", "site/row": "7"}
    assert node.labels == {"zone": "node's own"}, "the node is not modified"


def test_tryfirst_runs_before_plugin_order(site: FakeSite) -> None:
    add_hook(site, "a-site", LABELS, "{'rack': 'a'}")
    add_hook(site, "b-site", LABELS, "{'rack': 'b'}", options="(tryfirst=True)")
    assert registry.default_registry().node_labels(Node()) == {"rack": "b"}


def test_a_raising_or_malformed_hook_is_warned_about_and_skipped(site: FakeSite) -> None:
    add_hook(site, "a-site", LABELS, "{'rack': 1 / 0}")
    add_hook(site, "b-site", LABELS, "{'rack': 7}")
    add_hook(site, "c-site", LABELS, "{'rack': 'c'}")
    with pytest.warns(registry.PluginWarning) as caught:
        labels = registry.default_registry().node_labels(Node())
    assert labels == {"rack": "c"}
    messages = [str(w.message) for w in caught]
    assert messages == [  # pluggy's call order: the last registered first
        "plugin 'b-site' (b-site-dist 1.0): accelkit_node_labels must return str: str pairs, "
        "got {'rack': 7}; ignored",
        "plugin 'a-site' (a-site-dist 1.0): accelkit_node_labels raised ZeroDivisionError: "
        "division by zero; ignored",
    ]
    assert caught[0].filename == __file__, "the warning points at the caller"


def test_a_labels_hook_that_fails_during_detection_is_an_error_of_the_node(site: FakeSite) -> None:
    """The warning alone left no trace in the node: ``accelkit ls`` (which lists the node's
    diagnostics) and ``ls --json`` dropped the hook's failure, and the label, silently."""
    add_hook(site, "a-site", LABELS, "{'rack': 1 / 0}")
    add_hook(site, "b-site", LABELS, "{'rack': 'b'}")
    with pytest.warns(registry.PluginWarning):
        node = detect_node(FakeHost())
    fault = (
        "plugin 'a-site' (a-site-dist 1.0): accelkit_node_labels raised ZeroDivisionError: "
        "division by zero; ignored"
    )
    assert node.labels["rack"] == "b"
    assert [(d.family, d.message) for d in node.diagnostics if d.level == "error"] == [
        ("accelkit", fault)
    ]
    # `accelkit plugins` showed the plugin "ok": its report carries the fault as a problem
    problems = {info.name: info.problems for info in registry.plugin_report()}
    assert (problems["a-site"], problems["b-site"]) == ((fault,), ())


def test_a_hook_fault_is_a_problem_of_the_plugin_until_the_hook_answers(site: FakeSite) -> None:
    once = (
        "from accelkit import hookimpl\ncalls = []\n\n@hookimpl\n"
        "def accelkit_node_labels(node):\n    calls.append(1)\n"
        "    if len(calls) == 1:\n        raise RuntimeError('first call')\n"
        "    return None\n"  # the hook's "nothing to add" is an answer too
    )
    site.add("flaky-dist", {"flaky": "flaky_hooks"}, {"flaky_hooks": once})
    plugins = registry.default_registry()
    with pytest.warns(registry.PluginWarning):
        assert plugins.node_labels(Node()) == {}
    [flaky] = [info for info in plugins.report() if info.name == "flaky"]
    assert flaky.problems == (
        "plugin 'flaky' (flaky-dist 1.0): accelkit_node_labels raised RuntimeError: first call; "
        "ignored",
    )
    assert plugins.node_labels(Node()) == {}
    [flaky] = [info for info in plugins.report() if info.name == "flaky"]
    assert flaky.problems == ()


def test_a_hook_fault_is_the_problem_of_the_plugin_that_made_it_not_of_its_namesake(
    site: FakeSite,
) -> None:
    """A vendor's own plugin may replace a built-in under its name (``nvidia``): the fault of
    the vendor's hook was listed on the replaced built-in's row too."""
    source = manager_module("nvidia", resource="GPU", replaces="nvidia") + (
        "\n@hookimpl\ndef accelkit_node_labels(node):\n    raise RuntimeError('vendor')\n"
    )
    site.add("nvidia-accelkit", {"nvidia": "vendor_nv"}, {"vendor_nv": source})
    with pytest.warns(registry.PluginWarning, match="vendor"):
        registry.default_registry().node_labels(Node())
    rows = [
        (i.origin, i.status, i.problems) for i in registry.plugin_report() if i.name == "nvidia"
    ]
    fault = (
        "plugin 'nvidia' (nvidia-accelkit 1.0): accelkit_node_labels raised RuntimeError: "
        "vendor; ignored"
    )
    assert rows == [("builtin", "replaced", ()), ("entry-point", "ok", (fault,))]


def test_a_warning_from_deep_in_accelkit_points_at_the_callers_line(
    site: FakeSite, tmp_path: Path
) -> None:
    # record_snapshot loads the plugins through node detection: the warning named
    # accelkit/node/_snapshot.py, the first frame outside the registry package.
    from accelkit.host import FakeHost
    from accelkit.node._snapshot import record_snapshot

    add_hook(site, "a-site", LABELS, "{'rack': 1 / 0}")
    with pytest.warns(registry.PluginWarning) as caught:
        record_snapshot(tmp_path / "snap", FakeHost())
    assert {w.filename for w in caught} == {__file__}


def test_worker_env_returns_only_additions_and_keeps_visibility(site: FakeSite) -> None:
    add_hook(
        site, "a-env", WORKER_ENV, "{'HINT': '0.5', 'UNSET_ME': None, 'CUDA_VISIBLE_DEVICES': '0'}"
    )
    add_hook(site, "b-env", WORKER_ENV, "{'HINT': '0.9', 'OTHER': 'x'}")
    env = {"CUDA_VISIBLE_DEVICES": "0"}
    assert registry.default_registry().worker_env(GRANT, env) == {  # b-env is called first
        "HINT": "0.9",
        "UNSET_ME": None,
        "OTHER": "x",
    }


def test_worker_env_may_not_change_what_visibility_wrote(site: FakeSite) -> None:
    add_hook(site, "a-env", WORKER_ENV, "{'CUDA_VISIBLE_DEVICES': '1', 'HINT': 'h'}")
    with pytest.warns(registry.PluginWarning, match="may only add variables, not change "):
        added = registry.default_registry().worker_env(GRANT, {"CUDA_VISIBLE_DEVICES": "0"})
    assert added == {"HINT": "h"}


def test_the_hook_receives_grant_env_and_the_granted_families_managers(site: FakeSite) -> None:
    add_hook(
        site, "a-env", WORKER_ENV_MANAGERS, "{'SEEN': str((grant.token, sorted(env), managers))}"
    )
    grant = Grant(7, {"GPU": 1.0}, [(Device("0", family="nvidia", resource_name="GPU"), 1.0)])
    assert registry.default_registry().worker_env(grant, {"X": "1"}) == {
        "SEEN": "(7, ['X'], {'nvidia': <NvidiaManager nvidia:GPU>})"
    }


def test_trace_prints_every_hook_call(
    site: FakeSite, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ACCELKIT_TRACE_PLUGINS", "1")
    add_hook(site, "a-site", LABELS, "{'rack': 'r1'}")
    registry.default_registry().node_labels(Node())
    err = capsys.readouterr().err.splitlines()
    assert "accelkit trace: nvidia.accelkit_register_managers()" in err
    assert "accelkit trace:   -> [<NvidiaManager nvidia:GPU>]" in err
    calls = [line for line in err if "accelkit_node_labels" in line]
    assert len(calls) == 1
    assert calls[0].startswith("accelkit trace: a-site.accelkit_node_labels(node=Node(")
    assert err[-1] == "accelkit trace:   -> {'rack': 'r1'}"


def test_no_trace_by_default(site: FakeSite, capsys: pytest.CaptureFixture[str]) -> None:
    add_hook(site, "a-site", LABELS, "{'rack': 'r1'}")
    registry.default_registry().node_labels(Node())
    assert capsys.readouterr().err == ""


def hooks() -> list[str]:
    """Every hookspec, found as pluggy finds them (not merely by name)."""
    marker = f"{hookspecs.PROJECT}_spec"
    return sorted(n for n in dir(hookspecs) if hasattr(getattr(hookspecs, n), marker))


def test_every_hook_is_documented_and_has_a_typed_facade() -> None:
    assert "accelkit_register_managers" in hooks()
    for hook in hooks():
        assert hook.startswith("accelkit_"), f"hookspec {hook} lacks the accelkit_ prefix"
        assert (getattr(hookspecs, hook).__doc__ or "").strip(), f"{hook} has no docstring"
        if hook != "accelkit_register_managers":  # the loader itself calls that one
            facade = getattr(registry.Registry, hook[len("accelkit_") :], None)
            assert callable(facade), f"{hook} has no typed facade method on Registry"
    unmarked = [n for n in dir(hookspecs) if n.startswith("accelkit_") and n not in hooks()]
    assert not unmarked, f"accelkit_* functions in hookspecs without @hookspec: {unmarked}"


def test_every_hook_is_fully_typed() -> None:
    for hook in hooks():
        signature = inspect.signature(getattr(hookspecs, hook))
        untyped = [p.name for p in signature.parameters.values() if p.annotation is p.empty]
        assert not untyped, f"{hook}: parameters {untyped} have no type"
        assert signature.return_annotation is not signature.empty, f"{hook}: no return type"


def test_every_hook_has_a_test() -> None:
    """Datasette's meta-test: a hook that no test implements is a hook nobody tested."""
    sources = "\n".join(path.read_text() for path in TESTS.rglob("*.py"))
    missing = [
        hook
        for hook in hooks()
        if not re.search(rf"^@hookimpl\b.*\n(?:@.*\n)*def {hook}\(", sources, re.MULTILINE)
    ]
    assert not missing, f"hooks that no test implements with @hookimpl: {missing}"


def test_every_hook_is_in_the_plugin_authors_guide() -> None:
    guide = (TESTS.parent / "docs" / "plugin-authoring.md").read_text()
    missing = [hook for hook in hooks() if f"`{hook}" not in guide]
    assert not missing, f"docs/plugin-authoring.md does not describe the hooks {missing}"
