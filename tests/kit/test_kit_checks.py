"""Each check against a manager with exactly one defect: it fails, and its message says what.

The well-behaved ``WidgetManager`` passes every check that does not need installation; each
subclass breaks one rule.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import socket
import subprocess
import textwrap
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Optional

import pytest
from accelkit import (
    AcceleratorManager,
    Device,
    FakeHost,
    Frameworks,
    Host,
    InvalidRequest,
    registry,
)
from accelkit.detect import call_probe, detect_layers, first_records
from accelkit.testing import Outcome, Subject, all_checks, run_checks
from kit_support import write_distribution

INSTALLED_ONLY = {"import_is_light", "entry_point", "distribution"}


class WidgetManager(AcceleratorManager):
    name = "widget"
    resource_name = "WIDGET"
    visible_devices_env_var = "WIDGET_VISIBLE_DEVICES"

    def detect(self, host: Host) -> list[Device]:
        names = [p.rpartition("widget")[2] for p in host.glob("/dev/widget[0-9]*")]
        return [Device(id=n, index=int(n), type_label="W-1") for n in names]


def make_widgets(count: int, root: Path) -> FakeHost:
    (root / "dev").mkdir()
    for n in range(count):
        (root / "dev" / f"widget{n}").write_text("")
    return FakeHost(root=root)


def outcomes(manager: AcceleratorManager, tmp_path: Path, **kwargs: object) -> dict[str, Outcome]:
    subject = Subject(manager=manager, workspace=tmp_path, make_host=make_widgets)
    return {o.check: o for o in run_checks(subject, **kwargs)}  # type: ignore[arg-type]


def failures(manager: AcceleratorManager, tmp_path: Path) -> dict[str, str]:
    """Failed checks and their messages, leaving out those that need an installed plugin."""
    runnable = [c.name for c in all_checks() if c.name not in INSTALLED_ONLY]
    found = outcomes(manager, tmp_path, select=runnable)
    return {name: o.message for name, o in found.items() if o.failing}


def test_a_conforming_manager_passes(tmp_path: Path) -> None:
    found = outcomes(WidgetManager(), tmp_path)
    assert {n for n, o in found.items() if o.status != "passed"} == INSTALLED_ONLY
    assert "no installed distribution declares" in found["entry_point"].message
    assert '[project.entry-points.accelkit]\n    widget = "' in found["entry_point"].message


def test_reading_os_environ_is_caught_by_decoys(tmp_path: Path) -> None:
    class ReadsEnviron(WidgetManager):
        def detect(self, host: Host) -> list[Device]:
            found = super().detect(host)
            wanted = os.environ.get("WIDGET_VISIBLE_DEVICES")
            return found if wanted is None else [d for d in found if d.id in wanted.split(",")]

    failed = failures(ReadsEnviron(), tmp_path)
    assert list(failed) == ["ignores_process_environment", "reads_only_through_host"]
    message = failed["ignores_process_environment"]
    assert "reads the process environment; read variables through host.env" in message
    # the audit sees the read itself, even when no decoy changes the outcome
    assert (
        "did os.environ['WIDGET_VISIBLE_DEVICES']: a manager looks at the machine only "
        in (failed["reads_only_through_host"])
    )


def test_reading_an_undeclared_process_variable_is_caught_by_the_audit(tmp_path: Path) -> None:
    class ReadsHome(WidgetManager):
        def detect(self, host: Host) -> list[Device]:
            os.getenv("WIDGET_HOME")  # no decoy is planted for it: only the audit can tell
            return super().detect(host)

    failed = failures(ReadsHome(), tmp_path)
    assert list(failed) == ["reads_only_through_host"]
    assert "did os.environ['WIDGET_HOME']" in failed["reads_only_through_host"]


def test_testing_a_machine_path_for_existence_is_caught(tmp_path: Path) -> None:
    class StatsDev(WidgetManager):
        def detect(self, host: Host) -> list[Device]:
            if not os.path.exists("/dev/widgetctl"):  # stat has no audit event: it is wrapped
                return super().detect(host)
            return []

    failed = failures(StatsDev(), tmp_path)
    assert list(failed) == ["reads_only_through_host"]
    assert "did os.stat(/dev/widgetctl)" in failed["reads_only_through_host"]


def test_importlib_import_of_a_vendor_library_is_caught(tmp_path: Path) -> None:
    class ImportsNvml(WidgetManager):
        def detect(self, host: Host) -> list[Device]:
            # the usual "library not installed" fallback hides nothing from the audit
            with contextlib.suppress(ImportError):
                importlib.import_module("pynvml")
            return super().detect(host)

    failed = failures(ImportsNvml(), tmp_path)
    assert list(failed) == ["reads_only_through_host"]
    assert "did import(pynvml)" in failed["reads_only_through_host"]
    assert "host.import_module" in failed["reads_only_through_host"]


def test_reading_undeclared_variables_is_caught(tmp_path: Path) -> None:
    class ReadsUndeclared(WidgetManager):
        def detect(self, host: Host) -> list[Device]:
            return [] if host.env.get("WIDGET_DEBUG") else super().detect(host)

        def read_visible(self, env: Mapping[str, str]) -> Optional[list[str]]:
            return super().read_visible(env) if "WIDGET_ENABLE" not in env else []

    failed = failures(ReadsUndeclared(), tmp_path)
    assert list(failed) == ["variables", "reads_declared_variables"]
    assert "read_visible reads ['WIDGET_ENABLE'], which env_vars_read" in failed["variables"]
    assert (
        "read host.env['WIDGET_DEBUG'], which env_vars_read ['WIDGET_VISIBLE_DEVICES']"
        in (failed["reads_declared_variables"])
    )


def test_a_probe_a_real_host_could_not_run_is_caught(tmp_path: Path) -> None:
    class LocalProbe(WidgetManager):
        def detect(self, host: Host) -> list[Device]:
            def count_widgets(import_module: object) -> int:
                return 0

            call_probe(host, count_widgets)
            return super().detect(host)

    failed = failures(LocalProbe(), tmp_path)
    assert list(failed) == ["probes_are_portable"]
    assert "count_widgets, which a fresh process cannot import" in failed["probes_are_portable"]


def test_running_a_command_directly_is_caught(tmp_path: Path) -> None:
    class RunsCommand(WidgetManager):
        def detect(self, host: Host) -> list[Device]:
            with contextlib.suppress(OSError):
                subprocess.run(["widget-smi"], check=False)
            return super().detect(host)

    failed = failures(RunsCommand(), tmp_path)
    assert list(failed) == ["reads_only_through_host"]
    assert "did subprocess.Popen('widget-smi'" in failed["reads_only_through_host"]
    assert "host.run" in failed["reads_only_through_host"]


def test_network_use_is_caught(tmp_path: Path) -> None:
    class AsksMetadataServer(WidgetManager):
        def detect(self, host: Host) -> list[Device]:
            with contextlib.suppress(OSError):
                socket.getaddrinfo("169.254.169.254", 80)
            return super().detect(host)

    failed = failures(AsksMetadataServer(), tmp_path)
    assert list(failed) == ["no_network"]
    assert "socket.getaddrinfo('169.254.169.254'" in failed["no_network"]


def test_wrong_counts_are_caught(tmp_path: Path) -> None:
    class AlwaysOne(WidgetManager):
        def detect(self, host: Host) -> list[Device]:
            return [Device(id="0", index=0)]

    failed = failures(AlwaysOne(), tmp_path)
    assert "found [Device(id='0'" in failed["empty_host"]
    assert "found 1 offered device(s) on make_host(0); expected 0" in failed["requested_counts"]


def test_raising_for_a_missing_vendor_stack_is_caught(tmp_path: Path) -> None:
    class Raises(WidgetManager):
        def detect(self, host: Host) -> list[Device]:
            if host.run(["widget-smi"]).returncode:
                return []
            return super().detect(host)

    failed = failures(Raises(), tmp_path)
    assert (
        "raised on an empty FakeHost: FileNotFoundError: widget-smi: not found"
        in (failed["empty_host"])
    )
    assert "record why with accelkit.note()" in failed["empty_host"]


def test_undeclared_written_variables_are_caught(tmp_path: Path) -> None:
    class WritesMore(WidgetManager):
        def visibility_env(self, ids: Sequence[str]) -> dict[str, Optional[str]]:
            return {**super().visibility_env(ids), "WIDGET_ORDER": "PCI"}

    failed = failures(WritesMore(), tmp_path)
    assert list(failed) == ["variables"]
    assert "writes ['WIDGET_ORDER'], which env_vars_read" in failed["variables"]


def test_a_family_without_visibility_control_is_caught(tmp_path: Path) -> None:
    class Unrestricted(WidgetManager):
        visible_devices_env_var = None

    failed = failures(Unrestricted(), tmp_path)
    assert "a grant cannot restrict which devices a worker sees" in failed["variables"]
    assert "WidgetManager" not in failed["variables"]


def test_unusable_type_labels_are_caught(tmp_path: Path) -> None:
    class SpacedLabel(WidgetManager):
        def detect(self, host: Host) -> list[Device]:
            return [d.replace(type_label="Widget Pro 9000") for d in super().detect(host)]

    failed = failures(SpacedLabel(), tmp_path)
    assert list(failed) == ["type_labels"]
    assert "['Widget Pro 9000']" in failed["type_labels"]


def test_malformed_node_facts_are_caught(tmp_path: Path) -> None:
    class BadFacts(WidgetManager):
        def labels(self, devices: Sequence[Device], host: Host) -> dict[str, str]:
            return {"widget.count": len(devices)}  # type: ignore[dict-item]

    failed = failures(BadFacts(), tmp_path)
    assert list(failed) == ["node_facts"]
    assert "labels gives {'widget.count': 4}; keys and values must be str" in failed["node_facts"]


def test_a_quantity_rule_in_code_is_refused(tmp_path: Path) -> None:
    class Terse(WidgetManager):
        api_version = 2

        def validate_quantity(self, quantity: object) -> int:  # type: ignore[misc]
            try:
                return super().validate_quantity(quantity)
            except InvalidRequest:
                raise InvalidRequest("bad quantity") from None

    failed = failures(Terse(), tmp_path)
    assert list(failed) == ["declarations"]
    assert "Terse overrides validate_quantity" in failed["declarations"]
    assert "declare fractional and scheduling.allowed_quantities instead" in failed["declarations"]


def test_a_version_1_manager_passes_and_is_told_where_each_attribute_moved(
    tmp_path: Path,
) -> None:
    # DESIGN: version-1 plugins keep working, with one deprecation note ("the kit says the
    # same"): the check failed, so a vendor's CI went red on an accelkit upgrade.
    class Dated(WidgetManager):
        api_version = 1
        collective_backend = "acmeccl"

    assert failures(Dated(), tmp_path) == {}
    noted = outcomes(Dated(), tmp_path, select=["contract_version"])["contract_version"]
    assert (noted.status, noted.failing) == ("noted", False)
    assert "collective_backend -> frameworks.collective" in noted.message
    assert "declare api_version = 2" in noted.message
    declared = outcomes(
        Dated(),
        tmp_path,
        select=["contract_version"],
        expected_failures={"contract_version": "version 1 until the next release"},
    )["contract_version"]
    assert declared.status == "xpassed" and "remove the declaration" in declared.message


def test_a_partition_listed_with_its_parent_is_caught(tmp_path: Path) -> None:
    class BothAllocatable(WidgetManager):
        def detect(self, host: Host) -> list[Device]:
            found = super().detect(host)
            return [*found, Device(id="MIG-a", parent=found[0].id)] if found else found

    failed = failures(BothAllocatable(), tmp_path)
    assert "partition 'MIG-a' and its parent '0' are both listed" in (failed["devices_well_formed"])


def test_devices_out_of_index_order_are_caught(tmp_path: Path) -> None:
    """The core numbers devices by their place in detect()'s list: one that returned them
    reversed passed every check, and its node gave device '2' index 0 (placement starts there,
    and a grant of "the first GPU" named the one the runtime calls 2)."""

    class Reversed(WidgetManager):
        def detect(self, host: Host) -> list[Device]:
            return list(reversed(super().detect(host)))

    class ReversedUnnumbered(WidgetManager):  # the core gives the index: the list's order
        def detect(self, host: Host) -> list[Device]:
            return [Device(d.id, type_label=d.type_label) for d in reversed(super().detect(host))]

    for manager in (Reversed(), ReversedUnnumbered()):
        failed = failures(manager, tmp_path / type(manager).__name__)
        assert list(failed) == ["devices_well_formed"]
        said = "returned devices ['3', '2', '1', '0'] out of order; return them in index order"
        assert said in failed["devices_well_formed"]


def test_an_unexpected_exception_is_an_error_with_its_location(tmp_path: Path) -> None:
    class Crashes(WidgetManager):
        def read_visible(self, env: Mapping[str, str]) -> Optional[list[str]]:
            raise TypeError("unhashable type: 'list'")

    found = outcomes(Crashes(), tmp_path, select=["unset_is_unrestricted"])
    outcome = found["unset_is_unrestricted"]
    assert outcome.status == "error" and outcome.failing
    assert outcome.message.startswith("TypeError: unhashable type: 'list' (at ")
    assert "test_kit_checks.py:" in outcome.message


def test_expected_failures_are_strict(tmp_path: Path) -> None:
    found = outcomes(
        WidgetManager(),
        tmp_path,
        expected_failures={"entry_point": "not installed in this test", "repeatable": "wrong"},
    )
    assert found["entry_point"].status == "xfailed"
    assert found["repeatable"].status == "xpassed"
    assert "remove the declaration" in found["repeatable"].message
    with pytest.raises(ValueError, match="needs a reason"):
        outcomes(WidgetManager(), tmp_path, expected_failures={"repeatable": " "})
    with pytest.raises(ValueError, match="no conformance check named 'test_nope'"):
        outcomes(WidgetManager(), tmp_path, expected_failures={"test_nope": "typo"})


def test_a_heavy_import_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "heavy_widget.py").write_text(
        textwrap.dedent(
            """
            import pytest  # a framework at import time: every scheduler would pay for it
            from accelkit import AcceleratorManager

            class HeavyManager(AcceleratorManager):
                name = "heavy"
                resource_name = "HEAVY"
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    from heavy_widget import HeavyManager  # type: ignore[import-not-found]

    found = outcomes(HeavyManager(), tmp_path / "work", select=["import_is_light"])
    assert found["import_is_light"].status == "failed"
    assert "importing heavy_widget imports ['pytest']" in found["import_is_light"].message


def test_inconsistent_declarations_are_caught(tmp_path: Path) -> None:
    class Misdeclared(WidgetManager):
        replaces = "nvidia"
        frameworks = Frameworks(device=" xpu")

    failed = failures(Misdeclared(), tmp_path)
    assert list(failed) == ["declarations"]
    assert "Misdeclared.replaces is 'nvidia' but its name is 'widget'" in failed["declarations"]
    assert (
        "Misdeclared.frameworks.device must be a name like 'cuda' or None, got ' xpu'"
        in (failed["declarations"])
    )


def test_a_backdoor_that_does_not_load_fails_instead_of_skipping(tmp_path: Path) -> None:
    subject = Subject(
        manager=WidgetManager(),
        workspace=tmp_path,
        no_host_reason="entry point accelkit.testing:widget = 'w:make' does not load",
        host_error=True,
    )
    found = {o.check: o for o in run_checks(subject, select=["requested_counts", "round_trip"])}
    assert found["requested_counts"].status == "failed"
    assert found["requested_counts"].message.endswith("does not load")
    assert found["round_trip"].status == "passed"  # sample ids "0".."3" need no host


SMI_OUTPUT = '{"devices": [{"index": 0}, {"index": 1}]}'


def make_widgets_with_tool(count: int, root: Path) -> FakeHost:
    """Widget device files, and ``widget-smi`` listing the same cards."""
    (root / "dev").mkdir()
    for n in range(count):
        (root / "dev" / f"widget{n}").write_text("")
    listed = ", ".join(f'{{"index": {n}}}' for n in range(count))
    return FakeHost(root=root, commands={"widget-smi": (0, f'{{"devices": [{listed}]}}')})


class LayeredWidgetManager(WidgetManager):
    """A tool layer, then the device files."""

    def detect(self, host: Host) -> list[Device]:
        return detect_layers(host, ("command", self.from_tool), ("devfs", super().detect))

    def from_tool(self, host: Host) -> Optional[list[Device]]:
        records = first_records(host, ["widget-smi"])
        if records is None:
            return None
        return [Device(str(r["index"]), r["index"], type_label="W-1") for r in records]


def layered_failures(manager: AcceleratorManager, tmp_path: Path) -> dict[str, str]:
    subject = Subject(manager=manager, workspace=tmp_path, make_host=make_widgets_with_tool)
    runnable = [c.name for c in all_checks() if c.name not in INSTALLED_ONLY]
    return {o.check: o.message for o in run_checks(subject, select=runnable) if o.failing}


def test_a_layered_manager_whose_layers_work_passes(tmp_path: Path) -> None:
    assert layered_failures(LayeredWidgetManager(), tmp_path) == {}


def test_a_best_layer_that_raises_on_the_backdoor_host_is_caught(tmp_path: Path) -> None:
    class IntIds(LayeredWidgetManager):
        def from_tool(self, host: Host) -> Optional[list[Device]]:
            found = super().from_tool(host)
            return None if found is None else [Device(int(d.id)) for d in found]  # type: ignore[arg-type]

    failed = layered_failures(IntIds(), tmp_path)
    assert list(failed) == ["best_layer_answers"]
    assert (
        "on make_host(1): its command layer failed (ValueError: Device id must be a"
        in (failed["best_layer_answers"])
    )


def test_a_best_layer_that_quietly_gives_no_answer_is_caught(tmp_path: Path) -> None:
    class WrongField(LayeredWidgetManager):
        def from_tool(self, host: Host) -> Optional[list[Device]]:
            records = first_records(host, ["widget-smi"])
            return None if records is None or not any("id" in r for r in records) else []

    failed = layered_failures(WrongField(), tmp_path)
    assert list(failed) == ["best_layer_answers"]
    assert (
        "on make_host(4) took its devices from the devfs layer, the one that answers when its "
        "tools are missing, though command widget-smi answered"
    ) in failed["best_layer_answers"]


@pytest.fixture
def hang() -> Iterator[threading.Event]:
    """An event a hanging detect() waits for, set at the end so its thread ends too."""
    released = threading.Event()
    yield released
    released.set()


def test_a_detect_that_hangs_fails_at_the_detection_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hang: threading.Event
) -> None:
    monkeypatch.setenv("ACCELKIT_DETECT_TIMEOUT", "0.3")

    class Hangs(WidgetManager):
        def detect(self, host: Host) -> list[Device]:
            while not host.exists("/dev/widget0"):
                hang.wait(0.05)
                if hang.is_set():
                    return []
            return super().detect(host)

    started = time.monotonic()
    failed = failures(Hangs(), tmp_path)
    assert time.monotonic() - started < 10  # one deadline, then refused at once while it hangs
    assert (
        "Hangs (widget).detect() did not finish within 0.3s (ACCELKIT_DETECT_TIMEOUT) on an "
        "empty FakeHost" in failed["empty_host"]
    )
    assert "has not returned from an earlier call" in failed["broken_stack"]


class ImportsAcmelib(WidgetManager):
    def detect(self, host: Host) -> list[Device]:
        with contextlib.suppress(ImportError):
            importlib.import_module("acmelib")
        return super().detect(host)


def test_a_direct_import_of_a_declared_vendor_library_is_caught(tmp_path: Path) -> None:
    subject = Subject(
        manager=ImportsAcmelib(),
        workspace=tmp_path,
        make_host=make_widgets,
        vendor_libraries=("acmelib",),
    )
    found = {o.check: o for o in run_checks(subject, select=["reads_only_through_host"])}
    assert found["reads_only_through_host"].status == "failed"
    assert "did import(acmelib)" in found["reads_only_through_host"].message


def test_an_undeclared_vendor_library_is_not_known_to_the_kit(tmp_path: Path) -> None:
    assert failures(ImportsAcmelib(), tmp_path) == {}


def test_a_declared_vendor_library_imported_with_the_plugin_is_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "acmelib.py").write_text("")
    (tmp_path / "acme_widget.py").write_text(
        textwrap.dedent(
            """
            import acmelib  # the vendor's runtime at import time
            from accelkit import AcceleratorManager

            class AcmeWidgetManager(AcceleratorManager):
                name = "acmewidget"
                resource_name = "ACMEWIDGET"
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    from acme_widget import AcmeWidgetManager  # type: ignore[import-not-found]

    subject = Subject(
        manager=AcmeWidgetManager(), workspace=tmp_path, vendor_libraries=("acmelib",)
    )
    found = {o.check: o for o in run_checks(subject, select=["import_is_light"])}
    assert found["import_is_light"].status == "failed"
    assert "importing acme_widget imports ['acmelib']" in found["import_is_light"].message


@pytest.fixture
def fresh_registry() -> Iterator[None]:
    """The default registry rebuilt on next use, and again after the test."""
    registry.reset()
    yield
    registry.reset()


def test_a_family_clash_fails_the_entry_point_as_the_registry_refuses_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_registry: None
) -> None:
    (tmp_path / "clashing_widget.py").write_text(
        textwrap.dedent(
            """
            from accelkit import AcceleratorManager, hookimpl

            class ClashingManager(AcceleratorManager):
                name = "acme"  # the example plugin's family
                resource_name = "ACME"

                def detect(self, host):
                    return []

            @hookimpl
            def accelkit_register_managers():
                return [ClashingManager()]
            """
        )
    )
    write_distribution(
        tmp_path, "accelkit-clash", "0.1.0", {"accelkit": {"zclash": "clashing_widget"}}
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    from clashing_widget import ClashingManager  # type: ignore[import-not-found]

    found = outcomes(ClashingManager(), tmp_path / "work", select=["entry_point"])
    assert found["entry_point"].status == "failed"
    assert (
        "entry point zclash = 'clashing_widget' of accelkit-clash: plugin 'zclash' "
        "(accelkit-clash 0.1.0) is not in use (error): family 'acme' is claimed by"
    ) in found["entry_point"].message
