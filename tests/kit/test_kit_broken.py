"""The kit through pytest on the deliberately broken example plugin: red, saying why.

Run with pytester, as a plugin author would run it, so what is asserted is what they would see.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest
from accelkit import registry
from accelkit.testing import all_checks
from kit_support import BROKEN, REPO

RUN_LINE = next(
    number
    for number, line in enumerate((BROKEN / "src/accelkit_broken/__init__.py").open(), 1)
    if 'host.run(["brk-smi"' in line
)
"""The line of the broken plugin that raises when its tool is missing: messages point at it."""

SUITE = textwrap.dedent(
    """
    from accelkit.testing import AcceleratorManagerSuite
    from accelkit_broken import BrokenManager
    from accelkit_broken.fakes import make_host


    class TestBroken(AcceleratorManagerSuite):
        manager_class = BrokenManager
        expected_failures = {expected!r}

        def make_host(self, count, root):
            return make_host(count, root)
    """
)

RED = {
    "test_visibility_signature": (
        "visibility_env's total must default to None (callers may not know it)"
    ),
    "test_type_labels": "type labels ['Broken Model 1'] are not usable as `accelerator_type:",
    "test_empty_host": (
        "detect() raised on an empty FakeHost: FileNotFoundError: brk-smi: not found on PATH "
        f"(accelkit_broken/__init__.py:{RUN_LINE} in detect); detection must return [] and "
        "record why with accelkit.note() instead"
    ),
    "test_broken_stack": "raised on a host where every command and probe times out: TimeoutError",
    "test_device_files_without_tools": (
        "raised on make_host(4) where its tools and libraries are not installed: "
        f"FileNotFoundError: brk-smi: not found on PATH (accelkit_broken/__init__.py:{RUN_LINE} "
        "in detect); fall back to the device files"
    ),
    "test_devices_well_formed": "device ids repeat: ['1', '1', '1', '1']",
    "test_reads_declared_variables": (
        "on an empty FakeHost read host.env['BROKEN_MODE'], which env_vars_read "
        "['BROKEN_VISIBLE_DEVICES'] does not declare"
    ),
    "test_probes_are_portable": (
        "probed accelkit_broken.BrokenManager.detect.<locals>.<lambda>, which a fresh process "
        "cannot import; probe functions must be defined at module level"
    ),
    "test_reads_only_through_host": (
        "did os.environ['BROKEN_DEBUG'], os.listdir(/dev): a manager looks at the machine only "
        "through host."
    ),
    "test_no_network": (
        "did socket.getaddrinfo('metadata.broken.internal', 80): detection must never use the "
        "network"
    ),
    "test_round_trip": "read_visible({'BROKEN_VISIBLE_DEVICES': '0 '}) gave None; the grant",
    "test_nothing_visible": "visibility_env([]) gives {'BROKEN_VISIBLE_DEVICES': ' '}",
    "test_no_whitespace_written": "writes BROKEN_VISIBLE_DEVICES=' ', with whitespace",
    "test_whitespace_tolerated": "gave None; the grant was for ['0', '1']",
    "test_import_is_light": "importing accelkit_broken imports ['pytest']; every scheduler",
    "test_distribution": (
        "distribution accelkit-broken 0.1.0 does not depend on accelkit (requires []); add "
        "'accelkit' to [project] dependencies"
    ),
}
"""Every check the broken plugin fails, with a piece of the message that says why: each broken
rule shows in its own check, under its own name, so the author knows what to fix."""

GREEN = len(all_checks()) - len(RED)
"""The checks the broken plugin passes (its declarations, counts, placement, entry point...)."""


@pytest.fixture
def broken(pytester: pytest.Pytester, broken_site: Path) -> Iterator[pytest.Pytester]:
    """A pytester whose sys.path has the broken plugin, installed as a (fake) distribution; the
    default registry, which the entry_point check asks, is loaded afresh from that path."""
    pytester.syspathinsert(BROKEN / "src")
    pytester.syspathinsert(broken_site)
    registry.reset()
    yield pytester
    registry.reset()


def failed_tests(result: pytest.RunResult) -> set[str]:
    return {r.nodeid.rpartition("::")[2] for r in result.reprec.getreports() if r.failed}  # type: ignore[attr-defined]


def test_the_suite_is_red_on_the_broken_plugin(broken: pytest.Pytester) -> None:
    broken.makepyfile(test_broken_plugin=SUITE.format(expected={}))
    result = broken.runpytest_inprocess()
    assert failed_tests(result) == set(RED)
    output = result.stdout.str()
    for test, explanation in RED.items():
        assert explanation in output, f"{test}: {explanation!r} is not in the output"
    result.assert_outcomes(failed=len(RED), passed=GREEN)


def test_declared_failures_are_strict_and_need_reasons(broken: pytest.Pytester) -> None:
    declared = dict.fromkeys(RED, "broken on purpose: it is the kit's negative example")
    declared["test_declarations"] = "wrongly declared: this one passes"
    broken.makepyfile(test_broken_plugin=SUITE.format(expected=declared))
    result = broken.runpytest_inprocess()
    result.assert_outcomes(xfailed=len(RED), failed=1, passed=GREEN - 1)
    result.stdout.fnmatch_lines(["*XPASS(strict)*wrongly declared: this one passes*"])

    broken.makepyfile(test_broken_plugin=SUITE.format(expected={"test_round_trip": ""}))
    result = broken.runpytest_inprocess()
    result.stdout.fnmatch_lines(["*expected failure 'test_round_trip' needs a reason*"])
    assert result.ret == pytest.ExitCode.INTERRUPTED

    broken.makepyfile(test_broken_plugin=SUITE.format(expected={"test_round_trips": "typo"}))
    result = broken.runpytest_inprocess()
    result.stdout.fnmatch_lines(["*no conformance check named 'test_round_trips'*"])


def test_the_pytest_plugin_is_opt_in(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_uses_fixtures="""
        def test_hosts(accelkit_hosts, accelkit_audit):
            host = accelkit_hosts("gaudi", 2)
            with accelkit_audit(host) as audit:
                host.listdir("/")
            assert audit.events == []
        """
    )
    result = pytester.runpytest_inprocess()
    result.stdout.fnmatch_lines(["*fixture 'accelkit_hosts' not found*"])
    result = pytester.runpytest_inprocess("-p", "accelkit.testing")
    result.assert_outcomes(passed=1)


def test_a_conftest_opts_in_with_pytest_plugins(pytester: pytest.Pytester) -> None:
    pytester.makeconftest('pytest_plugins = "accelkit.testing"')
    pytester.makepyfile(
        test_uses_fixtures="""
        import accelkit

        def test_hosts(accelkit_hosts):
            assert len(accelkit.get_manager("tpu").detect(accelkit_hosts("tpu", 4))) == 4
        """
    )
    pytester.runpytest_inprocess().assert_outcomes(passed=1)


def test_no_distribution_autoloads_the_kit_into_pytest() -> None:
    # pytest autoloads every `pytest11` entry point: accelkit must declare none, so installing
    # it (or any plugin) changes no other project's test run.
    autoloaded = [
        f"{dist.metadata['Name']}: {entry.value}"
        for dist in metadata.distributions()
        for entry in dist.entry_points
        if entry.group == "pytest11" and entry.value.startswith("accelkit")
    ]
    assert autoloaded == []
    assert "pytest11" not in (REPO / "pyproject.toml").read_text()
