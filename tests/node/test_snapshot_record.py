"""Snapshots: record what detection reads, replay it as a FakeHost, redact serials and UUIDs."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import shutil
from pathlib import Path

import pytest
from accelkit import registry
from accelkit.detect import call_probe, import_library, read_int, read_value, run_command
from accelkit.device import Device
from accelkit.errors import ConfigurationError
from accelkit.host import FakeHost, Host, load_snapshot
from accelkit.manager import AcceleratorManager
from accelkit.node._detect import detect_node
from accelkit.node._operator import EXCLUDE_ENV, OVERRIDE_ENV
from accelkit.node._snapshot import RecordingHost, record_snapshot
from accelkit.registry import variables_read
from core_fakes import MakeManagers, Provides, acme_csv, acme_host, acme_sysfs, static_manager


def replay(directory: Path) -> dict[str, object]:
    return detect_node(load_snapshot(directory)).to_dict()


def manifest(directory: Path) -> dict[str, object]:
    return json.loads((directory / "snapshot.json").read_text())  # type: ignore[no-any-return]


def all_text(directory: Path) -> str:
    parts = [(directory / "snapshot.json").read_text()]
    for path in sorted((directory / "root").rglob("*")):
        if path.is_file() and not path.is_symlink():
            parts.append(path.read_bytes().decode("utf-8", "replace"))
    return "\n".join(parts)


def sysfs_host(root: Path, count: int = 3, **env: str) -> FakeHost:
    acme_sysfs(root, count)
    (root / "dev").mkdir()
    for n in range(2):
        (root / "dev" / f"widget{n}").write_text("")
    (root / "dev/unrelated").write_text("")
    (root / "etc/rival").mkdir(parents=True)
    (root / "etc/rival/count").write_bytes(b"\x00\x01")  # binary: reads as nothing
    return FakeHost(root=root, env={"WIDGET_POD": "p1", "HOME": "/root", **env})


def test_a_sysfs_node_replays_equal(generic: object, sandbox: Path, tmp_path: Path) -> None:
    host = sysfs_host(sandbox)
    expected = detect_node(host).to_dict()
    assert len(expected["devices"]) == 5  # type: ignore[arg-type]
    out = record_snapshot(tmp_path / "snap", host)
    assert out == tmp_path / "snap"
    assert replay(out) == expected
    data = manifest(out)
    assert data["format"] == "accelkit-snapshot" and data["version"] == 1
    assert data["env"] == {"WIDGET_POD": "p1"}  # only declared variables; HOME is not one
    assert data["commands"] == [
        {
            "argv": ["acme-smi", "--csv"],
            "error": "missing",
            "message": "acme-smi: not found on PATH",
        }
    ]
    root = out / "root"
    link = root / "sys/class/acme/card1/device"
    assert link.is_symlink() and os.readlink(link) == "/sys/devices/pci0000:00/0000:11:00.0"
    assert (root / "sys/devices/pci0000:00/0000:11:00.0/model").read_text() == "Acme Y7\n"
    assert (root / "etc/rival/count").read_bytes() == b"\0"
    assert (root / "dev/unrelated").read_bytes() == b""  # listed, never read: a placeholder


def test_a_command_node_replays_equal_with_errors_kept(generic: object, tmp_path: Path) -> None:
    host = FakeHost(commands={"acme-smi": (0, acme_csv(4))})
    expected = detect_node(host).to_dict()
    assert replay(record_snapshot(tmp_path / "a", host)) == expected
    assert (tmp_path / "a/root").is_dir()

    slow = FakeHost(commands={"acme-smi": TimeoutError("acme-smi did not finish within 10s")})
    expected = detect_node(slow).to_dict()
    directory = record_snapshot(tmp_path / "b", slow)
    assert manifest(directory)["commands"] == [
        {
            "argv": ["acme-smi", "--csv"],
            "error": "timeout",
            "message": "acme-smi did not finish within 10s",
        }
    ]
    assert replay(directory) == expected
    with pytest.raises(TimeoutError):
        load_snapshot(directory).run(["acme-smi", "--csv"])


def test_operator_variables_are_recorded_but_applied_only_on_replay(
    generic: object, sandbox: Path, tmp_path: Path
) -> None:
    env = {
        OVERRIDE_ENV: '{"custom": 2}',
        EXCLUDE_ENV: "acme:1",
        "ACME_VISIBLE_DEVICES": "0,1,2",
    }
    host = sysfs_host(sandbox, 3, **env)
    expected = detect_node(host).to_dict()
    directory = record_snapshot(tmp_path / "s", host)
    assert manifest(directory)["env"] == {**env, "WIDGET_POD": "p1"}
    # the excluded card's facts were recorded too, so clearing the variable brings it back
    assert (directory / "root/sys/devices/pci0000:00/0000:11:00.0/model").exists()
    assert replay(directory) == expected
    assert [d["id"] for d in expected["devices"]][:2] == ["0", "2"]  # type: ignore[index]


def test_vendor_libraries_are_unavailable_while_recording(
    use_managers: MakeManagers, tmp_path: Path
) -> None:
    def library_first(host: Host) -> list[Device]:
        if import_library(host, "acmelib") is not None:
            return [Device("lib")]
        if call_probe(host, _probe_acme) is not None:
            return [Device("probe")]
        text = run_command(host, ["acme-smi", "--count"])
        return [Device(str(n)) for n in range(int(text or 0))]

    use_managers(static_manager("acme", "GPU", [], detect=lambda self, host: library_first(host)))
    host = FakeHost(modules={"acmelib": object()}, commands={"acme-smi": (0, "3")})
    assert [d.id for d in detect_node(host).devices] == ["lib"]
    directory = record_snapshot(tmp_path / "s", host)
    replayed = detect_node(load_snapshot(directory))
    assert [d.id for d in replayed.devices] == ["0", "1", "2"]
    recorder = RecordingHost(host, tmp_path / "tree", [])
    with pytest.raises(ModuleNotFoundError):
        recorder.import_module("acmelib")
    assert detect_node(recorder).to_dict() == replayed.to_dict()


def _probe_acme(import_module: object) -> int:
    return len(import_module("acmelib").devices)  # type: ignore[operator]


def test_recording_host_answers_as_its_host_and_copies_every_answer(
    sandbox: Path, tmp_path: Path
) -> None:
    acme_sysfs(sandbox, 1)
    inner = FakeHost(root=sandbox)
    tree = tmp_path / "tree"
    recorder = RecordingHost(inner, tree, [])
    device = "/sys/class/acme/card0/device"
    assert recorder.realpath(device) == inner.realpath(device)
    assert recorder.readlink(f"{device}/driver") == "../../../bus/pci/drivers/acme"
    assert recorder.glob("/sys/class/acme/card*") == ["/sys/class/acme/card0"]
    assert recorder.is_dir(f"{device}/driver")
    assert not recorder.exists("/sys/missing")
    assert recorder.listdir("/sys/class/acme") == ["card0"]
    replayed = FakeHost(root=tree)
    for call in ("realpath", "readlink", "is_dir", "exists", "read_text"):
        assert getattr(replayed, call)(f"{device}/driver") == getattr(inner, call)(
            f"{device}/driver"
        ), call
    assert replayed.glob("/sys/class/acme/card*") == ["/sys/class/acme/card0"]
    assert not (tree / "sys/missing").exists()


def test_an_existing_snapshot_is_replaced_only_when_asked(generic: object, tmp_path: Path) -> None:
    directory = tmp_path / "s"
    record_snapshot(directory, acme_host(csv=acme_csv(1)))
    (directory / "README").write_text("mine")
    with pytest.raises(FileExistsError, match="already holds a snapshot"):
        record_snapshot(directory, acme_host())
    record_snapshot(directory, acme_host(csv=acme_csv(3)), overwrite=True)
    assert len(replay(directory)["devices"]) == 3  # type: ignore[arg-type]
    assert (directory / "README").read_text() == "mine"
    stranger = tmp_path / "t"
    (stranger / "root").mkdir(parents=True)
    with pytest.raises(FileExistsError, match="not a snapshot"):
        record_snapshot(stranger, acme_host(), overwrite=True)


# -- redaction --------------------------------------------------------------------------------
SERIALS_CSV = (
    "0, GPU-8b2f1c3d-1111-4222-8333-444455556666, Acme Z9, 16384\n"
    "1, GPU-0a0b0c0d-aaaa-4bbb-8ccc-ddddeeeeffff, Acme Z9, 16384\n"
)


def secret_host(root: Path) -> FakeHost:
    acme_sysfs(root, 1)
    serial = root / "sys/devices/pci0000:00/0000:10:00.0"
    (serial / "serial_number").write_text("1324321098765\n")
    (serial / "info").write_text('{"serial_number": "PHX-77", "uuid": "GPU-8b2f1c3d"}\n')
    return FakeHost(
        root=root,
        env={"ACME_VISIBLE_DEVICES": "GPU-0a0b0c0d-aaaa-4bbb-8ccc-ddddeeeeffff,0"},
        commands={
            ("acme-smi", "--csv"): (0, SERIALS_CSV),
            "acme-info": (0, "Serial Number : 1324321098765\nSerial: N/A\n"),
        },
    )


def test_redaction_replaces_serials_and_uuids_consistently(
    use_managers: MakeManagers, sandbox: Path, tmp_path: Path
) -> None:
    from core_fakes import AcmeManager

    class Curious(AcmeManager):
        def detect(self, host: Host) -> list[Device]:
            run_command(host, ["acme-info", "-q"])
            host.read_text("/sys/class/acme/card0/device/serial_number")
            host.read_text("/sys/class/acme/card0/device/info")
            return super().detect(host)

    use_managers(Curious())
    host = secret_host(sandbox)
    plain = detect_node(host)
    directory = record_snapshot(tmp_path / "s", host, redact=True)
    text = all_text(directory)
    for secret in ("8b2f1c3d", "0a0b0c0d", "1324321098765", "PHX-77", "ddddeeeeffff"):
        assert secret not in text, secret
    assert "Serial: N/A" in text
    assert manifest(directory)["redacted"] is True
    redacted = detect_node(load_snapshot(directory))
    # the same devices, types and visibility: the env token still names the same device
    assert [(d.id[:4], d.model, d.type_label) for d in redacted.devices] == [
        (d.id[:4], d.model, d.type_label) for d in plain.devices
    ]
    assert redacted.devices[0].uuid == redacted.devices[0].id
    assert redacted.resources == plain.resources
    env_token = manifest(directory)["env"]["ACME_VISIBLE_DEVICES"].split(",")[0]  # type: ignore[index]
    assert env_token == redacted.devices[0].id
    # the UUID prefix in the JSON file maps to the prefix of the full UUID's fake
    info = (directory / "root/sys/devices/pci0000:00/0000:10:00.0/info").read_text()
    full = redacted.devices[1].uuid  # device "0": GPU-8b2f1c3d-… before redaction
    assert plain.devices[1].uuid == "GPU-8b2f1c3d-1111-4222-8333-444455556666"
    assert full is not None
    assert '"uuid": "GPU-' in info and full.startswith(info.split('"uuid": "')[1][:12])
    # stable: recording the same host again gives the same bytes
    again = record_snapshot(tmp_path / "t", host, redact=True)
    assert all_text(again) == text


ANPU_UUIDS = ("ANPU-00000001", "ANPU-00000002", "ANPU-00000003")
"""A third-party family's UUIDs, of a shape the redaction's patterns do not know."""


class AnpuManager(AcceleratorManager):
    """NPUs listed by ``anpu-smi --json``, each one's NUMA node from the sysfs card whose
    ``uuid`` file names it: the two sources' facts are linked by the UUID."""

    name = "anpu"
    resource_name = "ANPU"
    visible_devices_env_var = "ANPU_VISIBLE_DEVICES"

    def detect(self, host: Host) -> list[Device]:
        numa = {
            read_value(host, f"{card}/uuid"): read_int(host, f"{card}/numa_node", 10)
            for card in host.glob("/sys/class/anpu/card*")
        }
        listed = json.loads(run_command(host, ["anpu-smi", "--json"]) or "[]")
        return [
            Device(str(n["index"]), type_label="ANPU-1", uuid=n["uuid"], numa_node=numa[n["uuid"]])
            for n in listed
        ]


def anpu_host(root: Path) -> FakeHost:
    """Three NPUs, the third hidden by the family's variable."""
    for n, uuid in enumerate(ANPU_UUIDS):
        card = root / f"sys/class/anpu/card{n}"
        card.mkdir(parents=True)
        (card / "uuid").write_text(uuid + "\n")
        (card / "numa_node").write_text(f"{n % 2}\n")
    listed = [{"index": n, "uuid": uuid} for n, uuid in enumerate(ANPU_UUIDS)]
    return FakeHost(
        root=root,
        env={"ANPU_VISIBLE_DEVICES": "0,1"},
        commands={("anpu-smi", "--json"): (0, json.dumps(listed))},
    )


def test_redaction_replaces_every_uuid_detection_reported_whatever_its_shape(
    use_managers: MakeManagers, sandbox: Path, tmp_path: Path
) -> None:
    use_managers(AnpuManager())
    host = anpu_host(sandbox)
    plain = detect_node(host)
    assert [d.uuid for d in plain.devices] == list(ANPU_UUIDS[:2])
    directory = record_snapshot(tmp_path / "s", host, redact=True)
    text = all_text(directory)
    for secret in ANPU_UUIDS:  # the hidden NPU's too: anpu-smi lists it
        assert secret not in text, secret
    # the same devices, and each one's sysfs facts still found by its (new) UUID
    redacted = detect_node(load_snapshot(directory))
    assert [(d.id, d.type_label, d.numa_node) for d in redacted.devices] == [
        ("0", "ANPU-1", 0),
        ("1", "ANPU-1", 1),
    ]
    uuids = [d.uuid for d in redacted.devices]
    assert None not in uuids and len(set(uuids)) == 2 and not set(uuids) & set(ANPU_UUIDS)
    assert all_text(record_snapshot(tmp_path / "t", host, redact=True)) == text  # stable


def test_a_reported_uuid_too_short_to_name_a_machine_is_not_replaced(
    use_managers: MakeManagers, tmp_path: Path
) -> None:
    def numbered(host: Host) -> list[Device]:  # UUIDs "1", "2": replacing them would recount
        count = int(run_command(host, ["acme-smi", "--count"]) or 0)
        return [Device(str(n), uuid=str(n + 1)) for n in range(count)]

    use_managers(static_manager("acme", "GPU", [], detect=lambda self, host: numbered(host)))
    host = FakeHost(commands={("acme-smi", "--count"): (0, "2")})
    directory = record_snapshot(tmp_path / "s", host, redact=True)
    assert manifest(directory)["commands"][0]["stdout"] == "2"  # type: ignore[index]
    assert [d.uuid for d in detect_node(load_snapshot(directory)).devices] == ["1", "2"]


@pytest.mark.parametrize(
    ("problem", "message"),
    [
        (None, "snapshot.json is missing"),
        ("{", "not valid JSON"),
        ('{"format": "other"}', "not an accelkit snapshot"),
        ('{"format": "accelkit-snapshot", "version": 9}', "version 9"),
        (
            '{"format": "accelkit-snapshot", "version": 1, '
            '"commands": [{"argv": ["x"], "error": "melted"}]}',
            "unknown command error 'melted'",
        ),
    ],
)
def test_bad_snapshots_are_value_errors(tmp_path: Path, problem: str | None, message: str) -> None:
    if problem is not None:
        (tmp_path / "snapshot.json").write_text(problem)
    with pytest.raises(ValueError, match=message):
        load_snapshot(tmp_path)


def test_a_version_1_snapshot_without_optional_fields_still_loads(tmp_path: Path) -> None:
    (tmp_path / "snapshot.json").write_text(
        '{"format": "accelkit-snapshot", "version": 1, "env": {"A": "1"}, "commands": ['
        '{"argv": ["a"], "returncode": 0, "stdout": "x"}, {"argv": ["b"], "error": "timeout"},'
        '{"argv": ["c"], "error": "failed", "message": "Permission denied"}]}'
    )
    host = load_snapshot(tmp_path)
    assert host.root is None and dict(host.env) == {"A": "1"}
    assert host.run(["a"]).stdout == "x"
    with pytest.raises(TimeoutError, match="b: recorded timeout"):
        host.run(["b"])
    with pytest.raises(OSError, match="Permission denied"):
        host.run(["c"])


# -- the built-in vendors, through their fake hosts -------------------------------------------
VENDORS = ("nvidia", "amd", "intel", "neuron", "tpu", "gaudi", "ascend")


@pytest.mark.parametrize("vendor", VENDORS)
def test_each_vendor_fake_host_records_and_replays(vendor: str, tmp_path: Path) -> None:
    module = f"accelkit_plugins.{vendor}.testing"
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} does not exist yet")
    registry.reset()
    if vendor not in [m.name for m in registry.managers()]:
        pytest.skip(f"the {vendor} plugin did not load (see `accelkit plugins`)")
    make_host = importlib.import_module(module).make_host
    (tmp_path / "root").mkdir()
    host = make_host(2, tmp_path / "root")
    direct = detect_node(host)
    directory = record_snapshot(tmp_path / "snap", host)
    replayed = detect_node(load_snapshot(directory))
    names = sorted({n for m in registry.managers() for n in variables_read(m)})
    without_libraries = detect_node(RecordingHost(host, tmp_path / "scratch", names))
    assert replayed.to_dict() == without_libraries.to_dict()
    if all(d.source != "library" for d in direct.devices):
        assert replayed.to_dict() == direct.to_dict()
        assert len([d for d in replayed.devices if d.family == vendor]) == 2
    redacted = detect_node(load_snapshot(record_snapshot(tmp_path / "r", host, redact=True)))
    assert [(d.family, d.type_label) for d in redacted.devices] == [
        (d.family, d.type_label) for d in replayed.devices
    ]
    assert redacted.resources == replayed.resources


def test_tpu_pod_variables_are_recorded_and_replayed(tmp_path: Path) -> None:
    if importlib.util.find_spec("accelkit_plugins.tpu.testing") is None:
        pytest.skip("accelkit_plugins.tpu.testing does not exist yet")
    registry.reset()
    if "tpu" not in [m.name for m in registry.managers()]:
        pytest.skip("the tpu plugin did not load (see `accelkit plugins`)")
    from accelkit_plugins.tpu import testing as tpu

    pod = {"TPU_ACCELERATOR_TYPE": "v6e-16", "TPU_WORKER_ID": "1", "TPU_NAME": "slice-b"}
    (tmp_path / "root").mkdir()
    host = tpu.make_host(4, tmp_path / "root", env={**pod, "UNRELATED": "x"})
    expected = detect_node(host).to_dict()
    directory = record_snapshot(tmp_path / "snap", host)
    assert manifest(directory)["env"] == pod
    assert replay(directory) == expected
    assert len(expected["devices"]) == 4  # type: ignore[arg-type]


EXAMPLE_NODES = sorted((Path(__file__).resolve().parents[2] / "examples/nodes").glob("*/"))


@pytest.mark.parametrize("example", EXAMPLE_NODES, ids=[p.name for p in EXAMPLE_NODES])
def test_example_snapshots_re_record_to_the_same_node(example: Path, tmp_path: Path) -> None:
    registry.reset()
    original = detect_node(load_snapshot(example))
    copy = record_snapshot(tmp_path / "copy", load_snapshot(example))
    assert replay(copy) == original.to_dict()
    redacted = detect_node(
        load_snapshot(record_snapshot(tmp_path / "r", load_snapshot(example), redact=True))
    )
    assert redacted.resources == original.resources
    assert [(d.family, d.type_label, d.model) for d in redacted.devices] == [
        (d.family, d.type_label, d.model) for d in original.devices
    ]


def test_a_failed_recording_leaves_nothing_and_can_be_made_again(tmp_path: Path) -> None:
    rivals = [
        static_manager(
            family, family.upper(), [Device("0")], visible_devices_env_var="ACME_VISIBLE"
        )
        for family in ("acmea", "acmeb")
    ]
    clashing = registry.Registry([Provides(rivals)], autoload=False)
    target = tmp_path / "node"
    with pytest.raises(ConfigurationError, match="ACME_VISIBLE"):
        record_snapshot(target, FakeHost(), registry=clashing)
    assert not target.exists()

    target.mkdir()
    (target / "notes.txt").write_text("mine")
    with pytest.raises(ConfigurationError):
        record_snapshot(target, FakeHost(), registry=clashing)
    assert sorted(p.name for p in target.iterdir()) == ["notes.txt"]

    fine = registry.Registry([Provides(rivals[:1])], autoload=False)
    assert record_snapshot(target, FakeHost(), registry=fine) == target
    assert [d.id for d in detect_node(load_snapshot(target), registry=fine).devices] == ["0"]


def test_a_snapshot_re_recorded_in_place_is_replaced_only_once_recorded(tmp_path: Path) -> None:
    """Recorded in place, the old snapshot's files were deleted before detection read them
    through the replay: the new one held nothing. It is recorded beside, then put in place; a
    recording that fails leaves the old one whole."""
    snapshot = tmp_path / "snap"
    shutil.copytree(EXAMPLE_NODES[0], snapshot, symlinks=True)
    expected = replay(snapshot)
    assert record_snapshot(snapshot, load_snapshot(snapshot), overwrite=True) == snapshot
    assert replay(snapshot) == expected
    with pytest.raises(FileExistsError, match="already holds a snapshot"):
        record_snapshot(snapshot, load_snapshot(snapshot))
    rivals = [
        static_manager(family, family.upper(), [Device("0")], visible_devices_env_var="ACME_V")
        for family in ("acmea", "acmeb")
    ]
    clashing = registry.Registry([Provides(rivals)], autoload=False)
    with pytest.raises(ConfigurationError, match="ACME_V"):
        record_snapshot(snapshot, load_snapshot(snapshot), overwrite=True, registry=clashing)
    assert replay(snapshot) == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == ["snap"]
