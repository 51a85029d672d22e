"""The pytest face of the kit: one mixin per topic, the aggregate suite, and what a subclass may
set (``host_counts``, ``manager``)."""

from __future__ import annotations

import pytest
from accelkit.testing import (
    AcceleratorManagerSuite,
    ContractTests,
    DetectionTests,
    HygieneTests,
    PackagingTests,
    QuantityPlacementTests,
    VisibilityTests,
)
from accelkit.testing._catalog import TOPICS, all_checks, checks_of

MIXINS = {
    "contract": ContractTests,
    "detection": DetectionTests,
    "visibility": VisibilityTests,
    "quantities": QuantityPlacementTests,
    "hygiene": HygieneTests,
    "packaging": PackagingTests,
}


def method_names(cls: type) -> list[str]:
    return sorted(name for name in dir(cls) if name.startswith("test_"))


@pytest.mark.parametrize("topic", TOPICS)
def test_each_mixin_holds_exactly_its_topic(topic: str) -> None:
    assert method_names(MIXINS[topic]) == sorted(c.test_name for c in checks_of(topic))
    assert checks_of(topic), topic


def test_the_suite_holds_every_check_and_each_test_says_what_it_proves() -> None:
    assert method_names(AcceleratorManagerSuite) == sorted(c.test_name for c in all_checks())
    for check in all_checks():
        assert getattr(AcceleratorManagerSuite, check.test_name).__doc__ == check.description
        assert check.description, check.name


def test_one_mixin_alone_with_chosen_counts_and_a_manager_instance(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_widget="""
        from accelkit import AcceleratorManager, Device, FakeHost
        from accelkit.testing import DetectionTests

        ASKED = []


        class WidgetManager(AcceleratorManager):
            name = "widget"
            resource_name = "WIDGET"
            visible_devices_env_var = "WIDGET_VISIBLE_DEVICES"

            def detect(self, host):
                return [Device(id=p[-1]) for p in host.glob("/dev/widget[0-9]")]


        class TestWidget(DetectionTests):
            manager = WidgetManager()
            host_counts = (0, 3)

            def make_host(self, count, root):
                ASKED.append(count)
                (root / "dev").mkdir()
                for n in range(count):
                    (root / "dev" / f"widget{n}").write_text("")
                return FakeHost(root=root)


        def test_zz_only_the_chosen_counts_were_asked():
            assert set(ASKED) == {0, 3}
        """
    )
    result = pytester.runpytest_inprocess("-p", "no:randomly")
    result.assert_outcomes(passed=len(checks_of("detection")) + 1)


def test_the_suite_runs_in_catalogue_order(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_acme="""
        from accelkit.testing import AcceleratorManagerSuite
        from accelkit_example import AcmeManager

        class TestAcme(AcceleratorManagerSuite):
            manager_class = AcmeManager
        """
    )
    result = pytester.runpytest_inprocess("--collect-only", "-q")
    collected = [line.rpartition("::")[2] for line in result.outlines if "::" in line]
    assert collected == [c.test_name for c in all_checks()]


def test_a_version_1_plugin_passes_the_suite_with_its_deprecation_as_a_warning(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_dated="""
        from accelkit import AcceleratorManager
        from accelkit.testing import ContractTests


        class DatedManager(AcceleratorManager):
            name = "dated"
            resource_name = "DATED"
            visible_devices_env_var = "DATED_VISIBLE_DEVICES"
            api_version = 1
            collective_backend = "datedccl"

            def detect(self, host):
                return []


        class TestDated(ContractTests):
            manager = DatedManager()
        """
    )
    result = pytester.runpytest_inprocess("-p", "no:randomly", "-k", "contract_version")
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(["*PluginWarning: contract_version: *frameworks.collective*"])
