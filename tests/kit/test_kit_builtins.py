"""The kit on every built-in plugin, exactly as a vendor would run it on theirs (fsspec-style:
the reference implementations keep the kit honest). Each built-in's backdoor is its registered
host builder in ``accelkit.testing.fakes``, so no class here writes ``make_host``."""

from __future__ import annotations

import pytest
from accelkit.testing import AcceleratorManagerSuite
from accelkit.testing.fakes import BUILTIN_HOSTS, host_builder
from accelkit_plugins.amd import AmdManager
from accelkit_plugins.ascend import AscendManager
from accelkit_plugins.gaudi import GaudiManager
from accelkit_plugins.intel import IntelManager
from accelkit_plugins.neuron import NeuronManager
from accelkit_plugins.nvidia import NvidiaManager
from accelkit_plugins.tpu import TpuManager


@pytest.mark.parametrize("family", sorted(BUILTIN_HOSTS))
def test_every_builtin_has_a_host_builder(family: str) -> None:
    # Without one the suite would skip the detection checks: green, but proving little.
    assert callable(host_builder(family))


class TestNvidia(AcceleratorManagerSuite):
    manager_class = NvidiaManager


class TestAmd(AcceleratorManagerSuite):
    manager_class = AmdManager


class TestIntel(AcceleratorManagerSuite):
    manager_class = IntelManager


class TestNeuron(AcceleratorManagerSuite):
    manager_class = NeuronManager


class TestTpu(AcceleratorManagerSuite):
    manager_class = TpuManager


class TestGaudi(AcceleratorManagerSuite):
    manager_class = GaudiManager


class TestAscend(AcceleratorManagerSuite):
    manager_class = AscendManager
