"""The conformance kit: prove a plugin right before any scheduler loads it.

Two faces over one catalogue of checks:

- ``AcceleratorManagerSuite`` (needs pytest, ``pip install 'accelkit[testing]'``): subclass it in
  a test module, set ``manager_class`` and write the backdoor ``make_host(count, root)``. The
  topic mixins (``ContractTests``, ``DetectionTests``, ``VisibilityTests``,
  ``QuantityPlacementTests``, ``HygieneTests``, ``PackagingTests``) can be used one by one.
- ``accelkit check FAMILY`` runs the same checks on an installed plugin, with no code and no
  pytest (:func:`run_checks` on a :class:`Subject`).

Fakes for plugin tests: ``fake_pynvml(gpus)`` and ``fake_amdsmi(gpus)`` stand in for NVML and
amdsmi (hand them to ``FakeHost(modules={"pynvml": ...})``), over ``fake_gpus(count, name)`` /
``FakeGpu`` / ``FakeMig`` and ``fake_amdgpus(count, device_id)`` / ``FakeAmdGpu``;
``emulated_pynvml(gpus)`` and ``emulated_amdsmi(gpus)`` are the vendors' real wrappers over the
same descriptions, with only their C libraries emulated (nvidia-ml-py and amdsmi installed);
``write_pci_function(root, bus_id, vendor, device)`` writes a PCI function's sysfs files under a
fake host's root, as the kernel lays them out; ``host_builder(family)`` is a family's registered
backdoor ``make_host(count, root)``.

The opt-in pytest plugin (``pytest -p accelkit.testing``, or ``pytest_plugins =
["accelkit.testing"]`` in a conftest) adds fixtures for plugin tests; it is never loaded into
other pytest runs. ``import accelkit.testing`` itself imports neither pytest nor any check.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelkit._lazy import lazy_exports

pytest_plugins = ["accelkit.testing._pytest_plugin"]
"""Read only by pytest, when this package is loaded as a plugin (``-p accelkit.testing``)."""

_LAZY = {
    "AcceleratorManagerSuite": "_suite",
    "ManagerTestBase": "_suite",
    "ContractTests": "_suite",
    "DetectionTests": "_suite",
    "VisibilityTests": "_suite",
    "QuantityPlacementTests": "_suite",
    "HygieneTests": "_suite",
    "PackagingTests": "_suite",
    "Subject": "_subject",
    "Skipped": "_subject",
    "Outcome": "_runner",
    "run_checks": "_runner",
    "all_checks": "_catalog",
    "Audit": "_audit",
    "watching": "_audit",
    "host_builder": "fakes",
    "fake_pynvml": "fakes.nvidia",
    "fake_gpus": "fakes.nvidia",
    "FakeGpu": "fakes.nvidia",
    "FakeMig": "fakes.nvidia",
    "fake_amdsmi": "fakes.amd",
    "fake_amdgpus": "fakes.amd",
    "FakeAmdGpu": "fakes.amd",
    "emulated_pynvml": "fakes.nvml_c",
    "emulated_amdsmi": "fakes.amdsmi_c",
    "write_pci_function": "fakes.pci",
}

__all__ = list(_LAZY)

if TYPE_CHECKING:
    from accelkit.testing._audit import Audit as Audit
    from accelkit.testing._audit import watching as watching
    from accelkit.testing._catalog import all_checks as all_checks
    from accelkit.testing._runner import Outcome as Outcome
    from accelkit.testing._runner import run_checks as run_checks
    from accelkit.testing._subject import Skipped as Skipped
    from accelkit.testing._subject import Subject as Subject
    from accelkit.testing._suite import AcceleratorManagerSuite as AcceleratorManagerSuite
    from accelkit.testing._suite import ContractTests as ContractTests
    from accelkit.testing._suite import DetectionTests as DetectionTests
    from accelkit.testing._suite import HygieneTests as HygieneTests
    from accelkit.testing._suite import ManagerTestBase as ManagerTestBase
    from accelkit.testing._suite import PackagingTests as PackagingTests
    from accelkit.testing._suite import QuantityPlacementTests as QuantityPlacementTests
    from accelkit.testing._suite import VisibilityTests as VisibilityTests
    from accelkit.testing.fakes import host_builder as host_builder
    from accelkit.testing.fakes.amd import FakeAmdGpu as FakeAmdGpu
    from accelkit.testing.fakes.amd import fake_amdgpus as fake_amdgpus
    from accelkit.testing.fakes.amd import fake_amdsmi as fake_amdsmi
    from accelkit.testing.fakes.amdsmi_c import emulated_amdsmi as emulated_amdsmi
    from accelkit.testing.fakes.nvidia import FakeGpu as FakeGpu
    from accelkit.testing.fakes.nvidia import FakeMig as FakeMig
    from accelkit.testing.fakes.nvidia import fake_gpus as fake_gpus
    from accelkit.testing.fakes.nvidia import fake_pynvml as fake_pynvml
    from accelkit.testing.fakes.nvml_c import emulated_pynvml as emulated_pynvml
    from accelkit.testing.fakes.pci import write_pci_function as write_pci_function

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
