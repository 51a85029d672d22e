"""``AcceleratorManagerSuite``: the conformance checks as a pytest test class to subclass.

A plugin's whole conformance test::

    from accelkit.testing import AcceleratorManagerSuite
    from acme_plugin import AcmeManager
    from acme_plugin.fakes import make_host

    class TestAcme(AcceleratorManagerSuite):
        manager_class = AcmeManager

        def make_host(self, count, root):
            return make_host(count, root)

The mixins (one per topic) are generated from the same catalogue ``accelkit check`` runs, each
test a thin wrapper around one check function. Expected failures are declared with a reason in
``expected_failures`` and are strict: a declared failure that passes fails the run.
"""

from __future__ import annotations

import functools
import warnings
from pathlib import Path
from typing import Any, Callable, ClassVar, Optional

try:
    import pytest
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "AcceleratorManagerSuite needs pytest: pip install 'accelkit[testing]' (or run the same "
        "checks without pytest: accelkit check FAMILY)"
    ) from exc

from accelkit.errors import PluginWarning
from accelkit.host import Host
from accelkit.manager import AcceleratorManager
from accelkit.testing._catalog import Check, all_checks, checks_of
from accelkit.testing._runner import normalize_expected_failures
from accelkit.testing._subject import Noted, Skipped, Subject
from accelkit.testing.fakes import BrokenHostBuilder, host_builder

__all__ = [
    "AcceleratorManagerSuite",
    "ContractTests",
    "DetectionTests",
    "HygieneTests",
    "ManagerTestBase",
    "PackagingTests",
    "QuantityPlacementTests",
    "VisibilityTests",
]


class ManagerTestBase:
    """What every mixin shares: the manager under test, the backdoor, expected failures.

    Set :attr:`manager_class` (instantiated without arguments) or :attr:`manager`, and override
    :meth:`make_host` unless the family's builder is registered in the ``accelkit.testing``
    entry-point group (as the built-ins' are).
    """

    manager_class: ClassVar[Optional[type[AcceleratorManager]]] = None
    manager: ClassVar[Optional[AcceleratorManager]] = None
    host_counts: ClassVar[Optional[tuple[int, ...]]] = None
    """Device counts to build hosts for (default: 0 and every allowed quantity, or 0, 1, 2, 4)."""
    vendor_libraries: ClassVar[tuple[str, ...]] = ()
    """Top-level modules of your vendor's runtime (``("acmelib",)``): detection must import them
    only through ``host.import_module``, and importing the plugin must not import them, as the
    built-in vendors' libraries."""
    expected_failures: ClassVar[dict[str, str]] = {}
    """``{"test_name": "why it fails"}``: strict expected failures (a passing one is an error)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        declared = normalize_expected_failures(cls.__dict__.get("expected_failures"))
        for name, reason in declared.items():
            test = getattr(cls, f"test_{name}", None)
            if test is None:
                raise TypeError(
                    f"{cls.__name__}.expected_failures names {name!r}, which none of its "
                    "mixins tests"
                )
            setattr(cls, f"test_{name}", pytest.mark.xfail(reason=reason, strict=True)(_copy(test)))

    def make_host(self, count: int, root: Path) -> Host:
        """The backdoor: a host on which the manager detects exactly ``count`` devices."""
        raise NotImplementedError

    def _manager(self) -> AcceleratorManager:
        if self.manager is not None:
            return self.manager
        if self.manager_class is not None:
            return self.manager_class()
        raise TypeError(f"{type(self).__name__} must set manager_class or manager")

    @pytest.fixture
    def accelkit_subject(self, tmp_path: Path) -> Subject:
        """The manager under test with its backdoor, in a fresh scratch directory."""
        manager = self._manager()
        builder: Optional[Callable[[int, Path], Host]] = None
        reason, broken = "", False
        if type(self).make_host is not ManagerTestBase.make_host:
            builder = self.make_host
        else:
            try:
                builder = host_builder(manager.name)
            except LookupError as exc:
                reason = f"{exc}; or override make_host(count, root) in {type(self).__name__}"
                broken = isinstance(exc, BrokenHostBuilder)  # declared, but unusable
        return Subject(
            manager=manager,
            workspace=tmp_path,
            make_host=builder,
            no_host_reason=reason,
            host_error=broken,
            counts=self.host_counts,
            vendor_libraries=self.vendor_libraries,
        )


def _copy(test: Callable[..., None]) -> Callable[..., None]:
    """A new function object, so marking it leaves the mixin's own test unmarked."""

    @functools.wraps(test)
    def copied(self: Any, accelkit_subject: Subject) -> None:
        test(self, accelkit_subject)

    return copied


def _test_for(check: Check) -> Callable[[Any, Subject], None]:
    def test(self: Any, accelkit_subject: Subject) -> None:
        failure = _failure_of(check, accelkit_subject)
        if failure is not None:  # outside the except block: pytest shows just the message
            pytest.fail(failure, pytrace=False)

    test.__name__ = test.__qualname__ = check.test_name
    test.__doc__ = check.description
    return test


def _failure_of(check: Check, subject: Subject) -> Optional[str]:
    """Run ``check``: None when it passes, its message when it fails; skips are pytest skips,
    and a note (a deprecation) is a :class:`~accelkit.PluginWarning` of a passing test.

    Other exceptions (a bug in the plugin or the kit) propagate with their traceback.
    """
    try:
        check.function(subject)
    except Skipped as exc:
        pytest.skip(str(exc))
    except Noted as exc:
        warnings.warn(f"{check.name}: {exc}", PluginWarning, stacklevel=2)
    except AssertionError as exc:
        return str(exc)
    return None


class _TopicTests(ManagerTestBase):
    topic: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        if "topic" in cls.__dict__:
            for each in checks_of(cls.topic):
                setattr(cls, each.test_name, _test_for(each))
        super().__init_subclass__(**kwargs)


class ContractTests(_TopicTests):
    """Names, variables, quantity and placement declarations, type labels, api_version."""

    topic = "contract"


class DetectionTests(_TopicTests):
    """Counts from the backdoor, nothing from nothing, repeatable, only through the Host."""

    topic = "detection"


class VisibilityTests(_TopicTests):
    """Read/format round trips, sentinels, subsets, no whitespace written."""

    topic = "visibility"


class QuantityPlacementTests(_TopicTests):
    """Validation agrees with the declaration, messages name the value, placement is sound."""

    topic = "quantities"


class HygieneTests(_TopicTests):
    """Importing the plugin pulls in no framework or vendor runtime."""

    topic = "hygiene"


class PackagingTests(_TopicTests):
    """Entry point present and loading, distribution name and version."""

    topic = "packaging"


class AcceleratorManagerSuite(
    ContractTests,
    DetectionTests,
    VisibilityTests,
    QuantityPlacementTests,
    HygieneTests,
    PackagingTests,
):
    """Every conformance check; subclass it as ``Test<Vendor>`` and set ``manager_class``."""


# pytest lists a base class's tests before a subclass's, in reverse MRO order: it would report
# packaging first and contract last. Defined again here, the tests run in catalogue order.
for _check in all_checks():
    setattr(AcceleratorManagerSuite, _check.test_name, _test_for(_check))
