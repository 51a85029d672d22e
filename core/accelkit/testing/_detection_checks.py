"""Detection: right counts from the backdoor, nothing from nothing, and only through the Host."""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from types import ModuleType
from typing import Any, Optional

from accelkit._visibility import is_index
from accelkit.detect._layers import LAYER_FAULT
from accelkit.device import Device
from accelkit.host import CommandResult, FakeHost, Host, HostView, ProbeEnv
from accelkit.host._base import ProbeFunction
from accelkit.registry import variables_read
from accelkit.testing._catalog import check
from accelkit.testing._subject import THROUGH_HOST, Skipped, Subject
from accelkit.testing._watch import WatchedHost

GARBAGE = "garbage output\n{[ not json, not csv ]\n\x1b[31mERROR\x1b[0m\n"
"""What a broken vendor command prints: no digits, no structure."""


class _BrokenStackHost(FakeHost):
    """A host whose every command prints garbage and whose every library is broken."""

    def run(
        self,
        argv: Sequence[str],
        timeout: Optional[float] = None,
        env: Optional[ProbeEnv] = None,
    ) -> CommandResult:
        self.runs.append(tuple(argv))
        return CommandResult(0, GARBAGE, "")

    def import_module(self, name: str) -> ModuleType:
        raise RuntimeError(f"{name}: driver/library version mismatch")


class _ToolsDownHost(HostView):
    """A backdoor host's files and variables, with its vendor tools and libraries gone wrong.

    ``mode`` is what every command does: ``"missing"`` (not installed), ``"failing"`` (exits 1
    with an error) or ``"hanging"`` (times out); libraries are not installed and probes time
    out, so only the device files are left to tell.
    """

    def __init__(self, inner: Host, mode: str) -> None:
        super().__init__(inner, inner.env)
        self.mode = mode

    def run(
        self,
        argv: Sequence[str],
        timeout: Optional[float] = None,
        env: Optional[ProbeEnv] = None,
    ) -> CommandResult:
        if self.mode == "missing":
            raise FileNotFoundError(f"{argv[0]}: not found on PATH")
        if self.mode == "hanging":
            raise TimeoutError(f"{argv[0]} did not finish within {timeout or 10:g}s")
        return CommandResult(1, "", f"{argv[0]}: error: the driver is not responding\n")

    def import_module(self, name: str) -> ModuleType:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    def probe(
        self,
        function: ProbeFunction,
        *args: Any,
        timeout: Optional[float] = None,
        env: Optional[ProbeEnv] = None,
    ) -> Any:
        raise TimeoutError(f"probe {function.__qualname__} did not finish")


TOOL_FAILURES = {
    "missing": "its tools and libraries are not installed",
    "failing": "its tools exit 1 and its libraries are not installed",
    "hanging": "its tools and probes time out and its libraries are not installed",
}


def _fingerprint(devices: Sequence[Device]) -> list[dict[str, Any]]:
    return [d.to_dict() for d in devices]


@check("detection")
def empty_host(subject: Subject) -> None:
    """A host with no files, variables, commands or libraries gives zero devices, no exception."""
    for host, what in ((FakeHost(), "an empty FakeHost"), (_empty_root(subject), "an empty root")):
        devices = subject.detect(host, what)
        assert devices == [], f"{subject.label}.detect() found {devices!r} on {what}; expected []"


def _empty_root(subject: Subject) -> FakeHost:
    root = subject.workspace / "empty-root"
    root.mkdir(exist_ok=True)
    return FakeHost(root=root)


@check("detection")
def broken_stack(subject: Subject) -> None:
    """Commands that hang or print garbage and broken libraries give zero devices, no exception."""
    for host, what in (
        (_ToolsDownHost(FakeHost(), "hanging"), "a host where every command and probe times out"),
        (_BrokenStackHost(), "a host where every command prints garbage and imports fail"),
    ):
        devices = subject.detect(host, what)
        assert devices == [], f"{subject.label}.detect() found {devices!r} on {what}; expected []"


@check("detection")
def device_files_without_tools(subject: Subject) -> None:
    """A backdoor host's files with the vendor's tools missing, failing or hanging: detection
    returns the devices the files show, or says why not; it never raises."""
    count = max(subject.host_counts(), default=0)
    if count == 0:
        raise Skipped("no device count above 0 to build a host for")
    for mode, what in TOOL_FAILURES.items():
        host = _ToolsDownHost(subject.host(count), mode)
        described = f"make_host({count}) where {what}"
        devices, _, notes = subject.noted_detect(
            host,
            described,
            advice="fall back to the device files, or return [] and say why with accelkit.note()",
        )
        assert devices or notes, (
            f"{subject.label}.detect() found nothing on {described} and said nothing: report "
            "the devices its files show, or say why with accelkit.note()"
        )


class _ToolUse(HostView):
    """A host passed through unchanged that remembers which of its tools answered: a command
    that exited 0 with output, a library that imported, a probe that returned something."""

    def __init__(self, inner: Host) -> None:
        super().__init__(inner, inner.env)
        self.answered: list[str] = []

    def run(
        self,
        argv: Sequence[str],
        timeout: Optional[float] = None,
        env: Optional[ProbeEnv] = None,
    ) -> CommandResult:
        result = super().run(argv, timeout, env)
        if result.returncode == 0 and result.stdout.strip():
            self.answered.append(f"command {' '.join(argv)}")
        return result

    def import_module(self, name: str) -> ModuleType:
        module = super().import_module(name)
        self.answered.append(f"library {name}")
        return module

    def probe(
        self,
        function: ProbeFunction,
        *args: Any,
        timeout: Optional[float] = None,
        env: Optional[ProbeEnv] = None,
    ) -> Any:
        result = super().probe(function, *args, timeout=timeout, env=env)
        if result is not None:
            self.answered.append(f"probe {getattr(function, '__qualname__', function)!r}")
        return result


@check("detection")
def best_layer_answers(subject: Subject) -> None:
    """On the backdoor's hosts no detection layer fails, and when a host's vendor tools answer,
    a layer reading them finds the devices rather than the fallback used without them."""
    if subject.make_host is None:
        subject.host(0)  # skipped, or failed for a declared backdoor that does not load
    for count in subject.host_counts():
        _no_layer_failed(subject, count)
    count = max(subject.host_counts(), default=0)
    if count > 0:
        _tools_answer(subject, count)


def _no_layer_failed(subject: Subject, count: int) -> None:
    """detect_layers asks the next layer when one raises or times out: on the host the author
    built for it, that hides a broken layer behind a fallback unless the kit looks."""
    what = f"make_host({count})"
    _, _, notes = subject.noted_detect(subject.host(count), what)
    faults = [re.match(LAYER_FAULT, n.message) for n in notes if n.level != "info"]
    for fault in faults:
        if fault is not None:
            raise AssertionError(
                f"{subject.label}.detect() on {what}: its {fault['source']} layer failed "
                f"({fault['error']}), so a later layer answered; on the host your backdoor "
                "builds every layer must work: fix that layer"
            )


def _tools_answer(subject: Subject, count: int) -> None:
    """The devices of a host whose tools answered must not come from the layer that answers
    when the tools are missing (devices without a ``source`` cannot be told apart)."""
    what = f"make_host({count})"
    watched = _ToolUse(subject.host(count))
    found = subject.detect(watched, what)
    if not watched.answered:
        return  # the backdoor feeds no vendor tool: the files are the best layer's source
    without = f"make_host({count}) where {TOOL_FAILURES['missing']}"
    try:
        fallback = subject.detect(_ToolsDownHost(subject.host(count), "missing"), without)
    except AssertionError:
        return  # raising without the tools is device_files_without_tools's finding
    sources = {d.source for d in found}
    if not fallback or not all(sources) or sources != {d.source for d in fallback}:
        return
    shown = ", ".join(sorted(map(str, sources)))
    raise AssertionError(
        f"{subject.label}.detect() on {what} took its devices from the {shown} layer, the one "
        f"that answers when its tools are missing, though {watched.answered[0]} answered: the "
        "layer reading that tool gave no answer; make it read what your backdoor gives it"
    )


@check("detection")
def requested_counts(subject: Subject) -> None:
    """make_host(count) gives exactly that many offered devices, for every count tried."""
    for count in subject.host_counts():
        devices = [d for d in subject.devices(count) if d.offered]
        assert len(devices) == count, (
            f"{subject.label}.detect() found {len(devices)} offered device(s) on "
            f"make_host({count}); expected {count}: ids {[d.id for d in devices]}"
        )


@check("detection")
def devices_well_formed(subject: Subject) -> None:
    """Ids and indices are unique and in index order, family fields match, and a partition's
    parent is not listed."""
    counts = [n for n in subject.host_counts() if n > 0]
    if not counts:
        raise Skipped("no device count above 0 to build a host for")
    devices = subject.devices(max(counts))
    label = subject.label
    ids = [d.id for d in devices]
    assert len(set(ids)) == len(ids), f"{label}: device ids repeat: {ids}"
    indices = [d.index for d in devices if d.index is not None]
    assert len(set(indices)) == len(indices), f"{label}: device indices repeat: {indices}"
    if indices:  # the plugin numbered its devices
        order = indices
    elif all(is_index(i) for i in ids):  # the core numbers them by place: ids must agree
        order = [int(i) for i in ids]
    else:  # ids that are no numbers (UUIDs) say nothing of order
        order = []
    assert order == sorted(order), (
        f"{label}: detect() returned devices {ids} out of order; return them in index order "
        "(the core numbers devices without an index by their place in the list: device '2' "
        "first would be index 0, where a runtime's device 0 is)"
    )
    manager = subject.manager
    for device in devices:
        assert device.family in ("", manager.name), (
            f"{label}: device {device.id!r} has family {device.family!r}; leave it empty "
            f"(the core fills it) or set {manager.name!r}"
        )
        assert device.resource_name in ("", manager.resource_name), (
            f"{label}: device {device.id!r} has resource_name {device.resource_name!r}; leave "
            f"it empty or set {manager.resource_name!r}"
        )
        assert device.parent is None or device.parent not in ids, (
            f"{label}: partition {device.id!r} and its parent {device.parent!r} are both "
            "listed; a partition and its parent must never both be allocatable"
        )


@check("detection")
def repeatable(subject: Subject) -> None:
    """Detecting twice on one host gives the same devices."""
    count = max(subject.host_counts(), default=0)
    host = subject.host(count)
    first = subject.detect(host, f"make_host({count})")
    second = subject.detect(host, f"make_host({count}), a second time")
    assert _fingerprint(first) == _fingerprint(second), (
        f"{subject.label}.detect() is not repeatable on make_host({count}): first "
        f"{[d.id for d in first]}, then {[d.id for d in second]}"
    )


@check("detection")
def ignores_process_environment(subject: Subject) -> None:
    """Detection reads variables through host.env only, and changes no environment."""
    count = _at_least_two(subject)
    host = subject.host(count)
    before = dict(os.environ)
    baseline = _fingerprint(subject.detect(host, f"make_host({count})"))
    changed = _environment_changes(before, dict(os.environ))
    assert not changed, f"{subject.label}.detect() changed os.environ: {changed}"
    variables = [*variables_read(subject.manager), "CUDA_VISIBLE_DEVICES"]
    for decoy in ("", "0"):
        with _decoys(dict.fromkeys(variables, decoy)):
            seen = _fingerprint(subject.detect(host, f"make_host({count}) with decoy variables"))
        assert seen == baseline, (
            f"{subject.label}.detect() on make_host({count}) gave a different result when "
            f"os.environ had {sorted(set(variables))} set to {decoy!r}: it reads the process "
            "environment; read variables through host.env instead"
        )


def _at_least_two(subject: Subject) -> int:
    counts = subject.host_counts()
    return next((n for n in counts if n >= 2), max(counts, default=0))


def _environment_changes(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))


@contextlib.contextmanager
def _decoys(values: Mapping[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _hosts_to_watch(subject: Subject) -> Iterator[tuple[Host, str]]:
    yield FakeHost(), "an empty FakeHost"
    if subject.make_host is not None:
        count = max(subject.host_counts(), default=0)
        yield subject.host(count), f"make_host({count})"
    if subject.replay is not None:
        yield subject.replay, "the node snapshot given with --host"


def _audit(subject: Subject, kinds: Sequence[str], advice: str) -> None:
    for host, what in _hosts_to_watch(subject):
        audit = subject.observe(host, what)
        found = audit.of_kind(*kinds)
        assert not found, (
            f"{subject.label}.detect() on {what} did {audit.summary(*kinds)}: {advice}"
        )


@check("detection")
def reads_declared_variables(subject: Subject) -> None:
    """Detection reads only the variables env_vars_read declares (snapshots record only those)."""
    declared = set(variables_read(subject.manager))
    for host, what in _hosts_to_watch(subject):
        watched = WatchedHost(host)
        subject.observe(watched, what)
        undeclared = sorted(watched.watched_env.names - declared)
        assert not undeclared, (
            f"{subject.label}.detect() on {what} read host.env{undeclared}, which env_vars_read "
            f"{sorted(declared)} does not declare; a snapshot would not record them, so a "
            "replayed node would differ from the real one"
        )


@check("detection")
def probes_are_portable(subject: Subject) -> None:
    """Functions given to host.probe are module-level and take JSON arguments (a real host runs
    them in a fresh process, where a fake host calls them in place)."""
    for host, what in _hosts_to_watch(subject):
        watched = WatchedHost(host)
        subject.observe(watched, what)
        for function, args in watched.probes:
            name = (
                f"{getattr(function, '__module__', '?')}.{getattr(function, '__qualname__', '?')}"
            )
            assert _importable(function), (
                f"{subject.label}.detect() on {what} probed {name}, which a fresh process cannot "
                "import; probe functions must be defined at module level"
            )
            try:
                json.dumps(list(args))
            except (TypeError, ValueError) as exc:
                raise AssertionError(
                    f"{subject.label}.detect() on {what} probed {name} with arguments {args!r}, "
                    f"which are not JSON ({exc}); pass plain data"
                ) from exc


def _importable(function: Any) -> bool:
    try:
        target: Any = importlib.import_module(function.__module__)
        for part in function.__qualname__.split("."):
            target = getattr(target, part)
    except (AttributeError, ImportError):
        return False
    return target is function


@check("detection")
def reads_only_through_host(subject: Subject) -> None:
    """Files, commands and libraries are reached only through the Host (an audit hook watches)."""
    _audit(subject, ("file", "process", "library", "environment"), THROUGH_HOST)


@check("detection")
def no_network(subject: Subject) -> None:
    """Detection opens no socket and looks up no name (an audit hook watches)."""
    _audit(subject, ("network",), "detection must never use the network")
