"""ACME accelerators for accelkit: a complete third-party plugin in one short module.

The fictional ACME card shows up as ``/dev/acme0``, ``/dev/acme1``, ... and its driver puts the
model name in ``/sys/class/acme/acme<N>/model``. A process sees the cards listed in
``ACME_VISIBLE_DEVICES``. That is all a plugin has to know:

- subclass :class:`accelkit.AcceleratorManager` and declare the vendor's facts as class
  attributes: ``name`` (the family), ``resource_name`` (what schedulers count), the visibility
  variable, and whichever rule differs from the defaults (here: whole cards only);
- write ``detect(host)``, looking at the machine only through ``host`` (so it runs unchanged on a
  ``FakeHost``, a snapshot or the real node) and returning ``[]`` when the vendor is absent;
- return an instance from ``accelkit_register_managers``, marked with ``@accelkit.hookimpl``;
- declare the module in the ``accelkit`` entry-point group of the package's ``pyproject.toml``::

      [project.entry-points.accelkit]
      acme = "accelkit_example"

Then ``pip install`` it: ``accelkit plugins`` lists it, ``accelkit.get_manager("acme")`` returns
the manager, nodes count ``ACME`` resources, and grants write ``ACME_VISIBLE_DEVICES``.
"""

from __future__ import annotations

from accelkit import AcceleratorManager, Device, Host, hookimpl, note
from accelkit.detection import read_value

__all__ = ["AcmeManager", "accelkit_register_managers"]

DEVICE_PREFIX = "/dev/acme"


class AcmeManager(AcceleratorManager):
    """ACME cards: one ``ACME`` resource per ``/dev/acme<N>``, granted whole."""

    name = "acme"
    resource_name = "ACME"
    visible_devices_env_var = "ACME_VISIBLE_DEVICES"
    fractional = False

    def detect(self, host: Host) -> list[Device]:
        """One device per ``/dev/acme<N>`` (id ``"<N>"``), its model read from sysfs."""
        devices = []
        for path in host.glob(DEVICE_PREFIX + "[0-9]*"):
            number = path[len(DEVICE_PREFIX) :]
            if not number.isdigit():
                continue
            model = read_value(host, f"/sys/class/acme/acme{number}/model")
            label = model.replace(" ", "-") if model else None
            devices.append(
                Device(id=number, index=int(number), model=model, type_label=label, source="devfs")
            )
        note(f"{len(devices)} ACME card(s) under /dev")
        return devices


@hookimpl
def accelkit_register_managers() -> list[AcceleratorManager]:
    """The ACME family."""
    return [AcmeManager()]
