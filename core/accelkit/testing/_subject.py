"""``Subject``: one manager under test, and the means to build hosts for it.

Every conformance check is a plain function of a :class:`Subject`. The pytest suite and
``accelkit check`` both build one and hand it to the same functions, and both see the plugin
as loaded by the default registry (the packaging checks), so the two agree about what
conformance means.
"""

from __future__ import annotations

import contextlib
import os
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from accelkit._settings import DETECT_TIMEOUT_VAR, Budgets
from accelkit.device import Device
from accelkit.diagnostics import Diagnostic, collecting
from accelkit.host import Host
from accelkit.host import _deadlines as deadlines
from accelkit.manager import AcceleratorManager
from accelkit.testing._audit import Audit, Forbidden, ForbiddenImport, watching

__all__ = ["DEFAULT_COUNTS", "THROUGH_HOST", "HostFactory", "Noted", "Skipped", "Subject"]

HostFactory = Callable[[int, Path], Host]
"""The backdoor: ``make_host(count, root)`` builds a host on which the manager detects exactly
``count`` devices, writing any files under ``root`` (an existing empty directory)."""

THROUGH_HOST = (
    "a manager looks at the machine only through host.read_text/exists/listdir/glob/readlink, "
    "host.env, host.run, host.import_module and host.probe, and changes nothing"
)

RAISED_ADVICE = "detection must return [] and record why with accelkit.note() instead"
"""What a failure says to do when ``detect()`` raised."""

DEFAULT_COUNTS = (0, 1, 2, 4)
"""Device counts asked of the backdoor when the family declares no allowed quantities."""


class Skipped(Exception):
    """A check that cannot run for this subject; the message says what would let it run."""


class Noted(Exception):
    """A check that passes with a note for the plugin's author: the plugin works, but says
    something a later accelkit will not read (a version-1 declaration), and where it moved."""


@dataclass
class Subject:
    """A manager under test, the backdoor that builds hosts for it, and a scratch directory.

    ``make_host`` is None when nobody provided one; ``no_host_reason`` then says why, and the
    checks that need hosts are skipped with it, or fail with it when ``host_error`` is set (a
    backdoor was declared but does not load). ``counts`` overrides the counts asked of the
    backdoor. ``replay`` is an extra host (a node snapshot) to detect on under the audit.
    ``vendor_libraries`` are the top-level modules of the plugin's own vendor, which detection
    must import only through ``host.import_module`` (as the built-in ``VENDOR_LIBRARIES``).
    """

    manager: AcceleratorManager
    workspace: Path
    make_host: Optional[HostFactory] = None
    no_host_reason: str = "no host builder (make_host) was given"
    host_error: bool = False
    counts: Optional[Sequence[int]] = None
    replay: Optional[Host] = None
    vendor_libraries: Sequence[str] = ()
    _hosts_made: int = field(default=0, init=False, repr=False)
    _sample: Optional[list[Device]] = field(default=None, init=False, repr=False)

    @property
    def family(self) -> str:
        """The family name, or a placeholder when the manager has none (a contract failure)."""
        name = getattr(self.manager, "name", None)
        return name if isinstance(name, str) else "<no name>"

    @property
    def label(self) -> str:
        """How messages name the manager: ``AcmeManager (acme)``."""
        return f"{type(self.manager).__name__} ({self.family})"

    def host_counts(self) -> list[int]:
        """The counts to build hosts for: given ones, else 0 and every allowed quantity."""
        if self.counts is not None:
            return sorted(set(self.counts))
        allowed = self.manager.scheduling.allowed_quantities
        return sorted({0, *allowed}) if allowed else list(DEFAULT_COUNTS)

    def host(self, count: int) -> Host:
        """A fresh host with ``count`` devices from the backdoor; :class:`Skipped` without one."""
        if self.make_host is None:
            if self.host_error:
                raise AssertionError(self.no_host_reason)
            raise Skipped(self.no_host_reason)
        self._hosts_made += 1
        root = self.workspace / f"host-{self._hosts_made}-{count}"
        root.mkdir(parents=True)
        host = self.make_host(count, root)
        if not isinstance(host, Host):
            raise AssertionError(
                f"make_host({count}, root) returned {host!r}; it must return an accelkit Host "
                "(usually accelkit.FakeHost(root=root, ...))"
            )
        return host

    def detect(self, host: Host, what: str) -> list[Device]:
        """``manager.detect(host)`` under the audit; an exception becomes a readable failure.

        ``what`` names the host in messages ("an empty FakeHost"). Forbidden accesses are
        blocked, and named only if detection then raises: the checks that report every one use
        :meth:`audited_detect`.
        """
        devices, _ = self.audited_detect(host, what)
        return devices

    def audited_detect(self, host: Host, what: str) -> tuple[list[Device], Audit]:
        """Detect on ``host`` and return the devices with the audit of what detection touched."""
        devices, audit, _ = self.noted_detect(host, what)
        return devices, audit

    def noted_detect(
        self, host: Host, what: str, advice: str = RAISED_ADVICE
    ) -> tuple[list[Device], Audit, list[Diagnostic]]:
        """Detect on ``host``: the devices, the audit, and the notes detection made; ``advice``
        follows the exception in the failure when ``detect()`` raises."""
        budgets = Budgets.from_env(os.environ)  # read before the audit, which would record it
        with watching(host, self.vendor_libraries) as audit, collecting(self.family) as notes:
            outcome = self._detect_in_time(host, what, budgets)
            if isinstance(outcome, Exception):
                raised = f"{type(outcome).__name__}: {outcome} ({_where(outcome)})"
                if _refused(outcome):
                    raise AssertionError(
                        f"{self.label}.detect() on {what} did {audit.summary()}, outside its "
                        f"host (the audit blocked it), then raised {raised}; {THROUGH_HOST}"
                    ) from outcome
                raise AssertionError(
                    f"{self.label}.detect() raised on {what}: {raised}; {advice}"
                ) from outcome
        if not isinstance(outcome, list) or not all(isinstance(d, Device) for d in outcome):
            raise AssertionError(
                f"{self.label}.detect() on {what} returned {outcome!r}; it must return a list "
                "of accelkit.Device"
            )
        return outcome, audit, notes

    def observe(self, host: Host, what: str = "a host under the audit") -> Audit:
        """Detect on ``host`` under the audit, for the checks about *how* detection works.

        An exception from ``detect()`` is ignored here: raising is what :func:`empty_host` and
        :func:`broken_stack` report, and each check should name its own problem. A detection
        cut at its deadline fails the check, since nothing about it can be observed.
        """
        budgets = Budgets.from_env(os.environ)  # read before the audit, which would record it
        with watching(host, self.vendor_libraries) as audit, collecting(self.family):
            self._detect_in_time(host, what, budgets)
        return audit

    def _detect_in_time(self, host: Host, what: str, budgets: Budgets) -> object:
        """What ``manager.detect(host)`` returned or raised (an exception other than
        ``Exception`` is raised here), run off this thread under node detection's deadline
        (``ACCELKIT_DETECT_TIMEOUT``); a detection cut there is an ``AssertionError``.

        As in node detection, a hung ``detect()`` cannot be killed: its thread is left, and the
        next detection fails at once while it runs instead of hanging every check in turn.
        """
        key = ("kit detect", type(self.manager))
        busy = deadlines.running(key)
        if busy is not None:
            raise AssertionError(f"{self.label}.detect() on {what} was not run: {busy}")
        outcome: list[object] = []

        def work() -> None:
            try:
                outcome.append(self.manager.detect(host))
            except BaseException as exc:  # judged by the caller, on the caller's thread
                outcome.append(exc)

        task = deadlines.Task(work, f"{self.family} detect()")
        with deadlines.clock(budgets) as running:
            deadlines.run_all([task], running)
        if not task.finished.is_set():
            if task.thread is not None:
                deadlines.remember(key, task.name, task.began, task.thread)
            raise AssertionError(
                f"{self.label}.detect() did not finish within {budgets.detection:g}s "
                f"({DETECT_TIMEOUT_VAR}) on {what}, where node detection would leave the family "
                "out; wait only through host.run and host.probe, whose timeouts bound it"
            )
        if isinstance(outcome[0], BaseException) and not isinstance(outcome[0], Exception):
            raise outcome[0]
        return outcome[0]

    def devices(self, count: int) -> list[Device]:
        """The devices detected on a backdoor host built for ``count`` devices."""
        return self.detect(self.host(count), f"make_host({count})")

    def sample_devices(self) -> list[Device]:
        """Devices to exercise visibility and placement with: the largest backdoor host's
        (detected once), else (no backdoor, or detection is broken: nothing found, or ids that
        repeat) devices "0".."3"."""
        if self._sample is None:
            largest = max(self.host_counts(), default=0)
            found: list[Device] = []
            if self.make_host is not None and largest > 0:
                with contextlib.suppress(AssertionError):  # the detection checks report it
                    found = self.devices(largest)
            if len({d.id for d in found}) != len(found):
                found = []  # devices_well_formed reports it
            found = [d for d in found if d.offered]  # a node never holds the others
            self._sample = found or [Device(id=str(n), index=n) for n in range(4)]
        return list(self._sample)

    def sample_ids(self) -> list[str]:
        """The ids of :meth:`sample_devices`."""
        return [d.id for d in self.sample_devices()]


def _inside(filename: str, directory: str) -> bool:
    return os.path.abspath(filename).startswith(directory + os.sep)


def _refused(exc: BaseException) -> bool:
    """Whether ``exc`` is, or comes from, an access the audit refused."""
    seen: set[int] = set()
    current: Optional[BaseException] = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, (Forbidden, ForbiddenImport)):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def _where(exc: BaseException) -> str:
    """``file:line in function`` of the innermost frame of the plugin (outside accelkit's core,
    such as a ``FakeHost`` method that raised), else outside the kit, to point at the line."""
    kit = os.path.dirname(os.path.abspath(__file__))
    core = os.path.dirname(kit)
    frames = traceback.extract_tb(exc.__traceback__)
    plugin = [f for f in frames if not _inside(f.filename, core)]
    outside = [f for f in frames if os.path.dirname(os.path.abspath(f.filename)) != kit]
    if not (plugin or outside or frames):
        return "no traceback"
    last = (plugin or outside or frames)[-1]
    shown = os.path.join(*os.path.normpath(last.filename).split(os.sep)[-2:])
    return f"{shown}:{last.lineno} in {last.name}"
