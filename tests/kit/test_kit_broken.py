"""The kit through pytest on the deliberately broken example plugin: red, saying why.

Run with pytester, as a plugin author would run it, so what is asserted is what they would see.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from kit_support import BROKEN

SUITE = textwrap.dedent(
    """
    from accelkit import FakeHost
    from accelkit.testing import AcceleratorManagerSuite
    from accelkit_broken import BrokenManager


    class TestBroken(AcceleratorManagerSuite):
        manager_class = BrokenManager
        expected_failures = {expected!r}

        def make_host(self, count, root):
            for number in range(count):
                (root / f"brk{{number}}").write_text("")
            return FakeHost(root=root)
    """
)

RED = {
    "test_node_facts": "did os.listdir(/dev)",
    "test_empty_host": "did os.listdir(/dev), outside its host (the audit blocked it)",
    "test_broken_stack": "did os.listdir(/dev), outside its host",
    "test_requested_counts": "detect() on make_host(0) did os.listdir(/dev)",
    "test_type_labels": "did os.listdir(/dev)",
    "test_devices_well_formed": "did os.listdir(/dev)",
    "test_repeatable": "did os.listdir(/dev)",
    "test_ignores_process_environment": "did os.listdir(/dev)",
    "test_reads_declared_variables": "did os.listdir(/dev)",
    "test_probes_are_portable": "did os.listdir(/dev)",
    "test_reads_only_through_host": "a manager looks at the machine only through host.",
    "test_no_network": "did os.listdir(/dev)",
    "test_round_trip": "read_visible({'BROKEN_VISIBLE_DEVICES': '0 '}) gave None; the grant",
    "test_nothing_visible": "visibility_env([]) gives {'BROKEN_VISIBLE_DEVICES': ' '}",
    "test_no_whitespace_written": "writes BROKEN_VISIBLE_DEVICES=' ', with whitespace",
    "test_whitespace_tolerated": "gave None; the grant was for",
    "test_quantity_rule": "validate_quantity(2) gave 10000 units; expected 20000",
    "test_rejection_names_value": "validate_quantity(-1) accepted it as 10000 units",
}
"""Every check the broken plugin fails, with a piece of the message that says why."""


@pytest.fixture
def broken(pytester: pytest.Pytester, broken_site: Path) -> pytest.Pytester:
    """A pytester whose sys.path has the broken plugin, installed as a (fake) distribution."""
    pytester.syspathinsert(BROKEN / "src")
    pytester.syspathinsert(broken_site)
    return pytester


def failed_tests(result: pytest.RunResult) -> set[str]:
    return {r.nodeid.rpartition("::")[2] for r in result.reprec.getreports() if r.failed}  # type: ignore[attr-defined]


def test_the_suite_is_red_on_the_broken_plugin(broken: pytest.Pytester) -> None:
    broken.makepyfile(test_broken_plugin=SUITE.format(expected={}))
    result = broken.runpytest_inprocess()
    assert failed_tests(result) == set(RED)
    output = result.stdout.str()
    for test, explanation in RED.items():
        assert explanation in output, f"{test}: {explanation!r} is not in the output"
    result.assert_outcomes(failed=len(RED), passed=7)


def test_declared_failures_are_strict_and_need_reasons(broken: pytest.Pytester) -> None:
    declared = dict.fromkeys(RED, "broken on purpose: it is the kit's negative example")
    declared["test_declarations"] = "wrongly declared: this one passes"
    broken.makepyfile(test_broken_plugin=SUITE.format(expected=declared))
    result = broken.runpytest_inprocess()
    result.assert_outcomes(xfailed=len(RED), failed=1, passed=6)
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
