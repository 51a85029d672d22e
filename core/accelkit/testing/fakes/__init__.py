"""Fake vendor libraries for plugin tests, and where the conformance kit finds fake hosts.

``host_builder(family)`` finds the backdoor ``make_host(count, root)`` for a family, declared in
the entry-point group ``accelkit.testing`` (``acme = "pkg.fakes:make_host"``): the built-ins
declare theirs there too (``nvidia = "accelkit_plugins.nvidia.testing:make_host"``), so every
family is found the same way. Nothing is imported until asked.

``fake_pynvml(fake_gpus(...))`` and ``fake_amdsmi(fake_amdgpus(...))`` build stand-ins for the
NVIDIA and AMD libraries, to hand to ``FakeHost(modules={"pynvml": ...})``; ``FakeGpu``,
``FakeMig`` and ``FakeAmdGpu`` describe single devices. Where the vendors' wrappers are installed
(nvidia-ml-py, amdsmi), ``emulated_pynvml(gpus)`` and ``emulated_amdsmi(gpus)`` give the real
wrappers over the same descriptions, with only their C libraries emulated.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Callable, Optional

from accelkit._distributions import metadata

if TYPE_CHECKING:
    from accelkit.host import Host
    from accelkit.testing.fakes.amd import FakeAmdGpu as FakeAmdGpu
    from accelkit.testing.fakes.amd import fake_amdgpus as fake_amdgpus
    from accelkit.testing.fakes.amd import fake_amdsmi as fake_amdsmi
    from accelkit.testing.fakes.amdsmi_c import emulated_amdsmi as emulated_amdsmi
    from accelkit.testing.fakes.nvidia import FakeGpu as FakeGpu
    from accelkit.testing.fakes.nvidia import FakeMig as FakeMig
    from accelkit.testing.fakes.nvidia import fake_gpus as fake_gpus
    from accelkit.testing.fakes.nvidia import fake_pynvml as fake_pynvml
    from accelkit.testing.fakes.nvml_c import emulated_pynvml as emulated_pynvml

__all__ = [
    "ENTRY_POINT_GROUP",
    "BrokenHostBuilder",
    "FakeAmdGpu",
    "FakeGpu",
    "FakeMig",
    "emulated_amdsmi",
    "emulated_pynvml",
    "fake_amdgpus",
    "fake_amdsmi",
    "fake_gpus",
    "fake_pynvml",
    "host_builder",
]

ENTRY_POINT_GROUP = "accelkit.testing"
"""Entry-point group where a plugin declares ``<family> = "module:make_host"``."""

_BUILTINS_DISTRIBUTION = "accelkit"
"""The distribution whose declarations are the built-ins': a third party's declaration for the
same family replaces them, as a vendor's own plugin may replace a built-in family."""

_LIBRARIES = {
    "fake_pynvml": "nvidia",
    "fake_gpus": "nvidia",
    "FakeGpu": "nvidia",
    "FakeMig": "nvidia",
    "fake_amdsmi": "amd",
    "fake_amdgpus": "amd",
    "FakeAmdGpu": "amd",
    "emulated_pynvml": "nvml_c",
    "emulated_amdsmi": "amdsmi_c",
}


class BrokenHostBuilder(LookupError):
    """A host builder is declared for the family but cannot be used: the plugin's packaging is
    wrong, so the checks that need hosts fail instead of being skipped."""


def host_builder(family: str) -> Callable[[int, Any], Host]:
    """The ``make_host(count, root)`` of ``family``; ``LookupError`` says why there is none
    (:class:`BrokenHostBuilder` when one is declared but unusable).

    A family declared both by accelkit (a built-in) and by another distribution gets the other
    distribution's builder: that distribution replaces the built-in's manager too.
    """
    declared = sorted(
        (ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP) if ep.name == family),
        key=lambda ep: str(ep.value),
    )
    replacing = [ep for ep in declared if _distribution(ep) != _BUILTINS_DISTRIBUTION]
    if replacing:
        declared = replacing
    owners = sorted({_owner(ep) for ep in declared})
    if len(owners) > 1:
        raise BrokenHostBuilder(
            f"{len(owners)} distributions declare a host builder for family {family!r} in "
            f"{ENTRY_POINT_GROUP!r}: {', '.join(owners)}; uninstall all but one"
        )
    if declared:
        try:
            builder: Callable[[int, Any], Host] = declared[0].load()
        except Exception as exc:
            raise BrokenHostBuilder(
                f"entry point {ENTRY_POINT_GROUP}:{family} = {declared[0].value!r} does not "
                f"load: {type(exc).__name__}: {exc}"
            ) from exc
        return builder
    raise LookupError(
        f"no host builder for family {family!r}: declare one in the {ENTRY_POINT_GROUP!r} "
        f'entry-point group ({family} = "yourpackage.fakes:make_host") so `accelkit check` can '
        "build hosts with N devices"
    )


def _distribution(entry_point: Any) -> Optional[str]:
    """The name of the distribution declaring an entry point (None when unknown)."""
    dist = getattr(entry_point, "dist", None)
    if dist is None:
        return None
    name: str = dist.metadata["Name"]
    return name


def _owner(entry_point: Any) -> str:
    """``name version`` of the distribution declaring an entry point (``?`` when unknown)."""
    dist = getattr(entry_point, "dist", None)
    if dist is None:
        return f"? ({entry_point.value})"
    return f"{dist.metadata['Name']} {dist.version}"


def __getattr__(name: str) -> Any:
    if name in _LIBRARIES:
        value = getattr(importlib.import_module(f".{_LIBRARIES[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
