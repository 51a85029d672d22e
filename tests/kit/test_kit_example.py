"""The ACME plugin's conformance test: the whole kit, in a few lines."""

from pathlib import Path

from accelkit import FakeHost
from accelkit.testing import AcceleratorManagerSuite
from accelkit_example import AcmeManager
from accelkit_example.fakes import make_host


class TestAcme(AcceleratorManagerSuite):
    manager_class = AcmeManager

    def make_host(self, count: int, root: Path) -> FakeHost:
        return make_host(count, root)
