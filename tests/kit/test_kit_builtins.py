"""The kit on every built-in plugin, exactly as a vendor would run it on theirs (fsspec-style:
the reference implementations keep the kit honest). Each built-in's backdoor is the host builder
its plugin declares in the ``accelkit.testing`` entry-point group, as a vendor's plugin would, so
no class here writes ``make_host``."""

from __future__ import annotations

import pytest
from accelkit.testing import AcceleratorManagerSuite
from accelkit.testing.fakes import host_builder
from accelkit_plugins.amd import AmdManager
from accelkit_plugins.ascend import AscendManager
from accelkit_plugins.gaudi import GaudiManager
from accelkit_plugins.intel import IntelManager
from accelkit_plugins.neuron import NeuronManager
from accelkit_plugins.nvidia import NvidiaManager
from accelkit_plugins.tpu import TpuManager

BUILTINS = ("nvidia", "amd", "intel", "neuron", "tpu", "gaudi", "ascend")


@pytest.mark.parametrize("family", BUILTINS)
def test_every_builtin_has_a_host_builder_in_its_plugin(family: str) -> None:
    # Without one the suite would skip the detection checks: green, but proving little.
    builder = host_builder(family)
    assert callable(builder)
    assert builder.__module__ == f"accelkit_plugins.{family}.testing"


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
