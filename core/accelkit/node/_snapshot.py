"""Node snapshots recorded: what node detection reads on a machine, written as a directory that
:func:`~accelkit.host.load_snapshot` replays without the machine (the format is described in
:mod:`accelkit.host._replay`, which reads it).

Recording (:func:`record_snapshot`) runs node detection on a :class:`RecordingHost`, which answers
exactly as the real host does while copying every answer into the tree, and which makes vendor
libraries unavailable so that the families fall back to the commands and files a snapshot can
hold. With ``redact=True`` serial numbers and UUIDs are replaced, consistently everywhere (files,
command arguments and outputs, variables), by stable fake ones of the same shape, so the replay
still finds the same devices with the same types: every UUID a family's ``detect()`` reported,
whatever its shape, and what :data:`_SECRET` and :data:`_SERIAL_FILES` recognise (UUID-shaped
text, ``GPU-``/``MIG-`` ids, values of serial-number and board-id fields, whole sysfs serial
files). File paths and symlink targets are kept as they are: they hold bus ids, not serials.
Other identifying text (a serial under a field name of the vendor's own, host names) is kept.
A family that finds its devices only through its library (no command, no sysfs) records
nothing: that is what the snapshot says, and ``accelkit ls -v`` on it tells why.

Layering: recording runs node detection, so this module sits beside :mod:`accelkit.node._record` (it
imports the registry and the node, and nothing below imports it); replay belongs to the host stage.
"""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
import re
import shutil
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Optional, Union

from accelkit._version import VERSION as ACCELKIT_VERSION
from accelkit.host import CommandResult, FakeHost, Host, HostView, LocalHost, ProbeEnv
from accelkit.host._base import MAX_READ_BYTES, ProbeFunction, resolve_under, run_on
from accelkit.host._replay import FORMAT, MANIFEST, ROOT, VERSION
from accelkit.node._detect import run_detection
from accelkit.node._operator import CONFIG_ENV_VARS
from accelkit.node._state import Detection
from accelkit.registry import Registry, resolve, variables_read

__all__ = ["RecordingHost", "record_snapshot"]

_UNREADABLE = b"\0"
"""Content of a recorded file that existed but was not text: it replays as unreadable."""


def record_snapshot(
    directory: Union[str, os.PathLike[str]],
    host: Optional[Host] = None,
    *,
    redact: bool = False,
    overwrite: bool = False,
    registry: Optional[Registry] = None,
) -> Path:
    """Record what node detection reads on ``host`` (this machine when None) into ``directory``.

    The directory is created if needed. An existing snapshot there is replaced only with
    ``overwrite=True``; other files in the directory are never touched. A recording that fails
    (a :class:`~accelkit.ConfigurationError` from detection) leaves no snapshot files behind,
    and no directory it created. ``registry`` chooses
    the plugins whose variables and commands are recorded (None: the default one). Returns the
    directory.

    A host whose files lie in ``directory`` (a snapshot re-recorded in place, to redact it) is
    recorded into a new directory beside it, which then takes the old snapshot's place: made in
    place, the recording would delete the very files it is about to read.
    """
    base = Path(directory)
    source = host if host is not None else LocalHost()
    if base.is_dir() and lies_within(source.root, base):
        _check_replaceable(base, overwrite)
        _record_beside(base, source, redact, registry)
        return base
    made = not base.exists()
    _prepare(base, overwrite)
    try:
        _record(base, host, redact, registry)
    except BaseException:
        _discard(base, made)
        raise
    return base


def _discard(base: Path, made: bool) -> None:
    """Remove what a failed recording left in ``base`` (and ``base`` itself when it made it), so
    the same call can be made again once the cause is fixed."""
    shutil.rmtree(base / ROOT, ignore_errors=True)
    (base / MANIFEST).unlink(missing_ok=True)
    if made:
        with contextlib.suppress(OSError):  # not empty: someone else's files, kept
            base.rmdir()


def _record(base: Path, host: Optional[Host], redact: bool, registry: Optional[Registry]) -> None:
    """Detect on ``host`` through a recording host, then write the manifest into ``base``."""
    source = host if host is not None else LocalHost()
    plugins = resolve(registry)
    declared = sorted({name for m in plugins.managers() for name in variables_read(m)})
    recorder = RecordingHost(source, base / ROOT, declared)
    detection = run_detection(recorder, plugins)
    source_env = source.env
    env = {n: source_env[n] for n in sorted({*declared, *CONFIG_ENV_VARS}) if n in source_env}
    commands = recorder.commands
    if redact:
        env, commands = _redact(env, commands, base / ROOT, _reported_uuids(detection))
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "env": env,
        "commands": commands,
        "recorded_by": f"accelkit {ACCELKIT_VERSION}",
        "redacted": redact,
    }
    # Made, never opened through a link: one planted in a directory others may write would
    # have this process write wherever it points.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    with os.fdopen(os.open(base / MANIFEST, flags, 0o666), "w", encoding="utf-8") as file:
        file.write(json.dumps(manifest, indent=2) + "\n")


def _prepare(base: Path, overwrite: bool) -> None:
    """Make ``base`` ready for a new snapshot, refusing to clobber one unless asked."""
    base.mkdir(parents=True, exist_ok=True)
    if _check_replaceable(base, overwrite):
        shutil.rmtree(base / ROOT, ignore_errors=True)
        (base / MANIFEST).unlink()
    (base / ROOT).mkdir()


def _check_replaceable(base: Path, overwrite: bool) -> bool:
    """Whether ``base`` holds a snapshot (that ``overwrite`` allows to replace); refuses one it
    does not allow, and a ``root`` without a manifest, which is no snapshot of ours."""
    manifest, root = base / MANIFEST, base / ROOT
    if not (os.path.lexists(manifest) or os.path.lexists(root)):  # a link counts, dangling too
        return False
    if not overwrite:
        raise FileExistsError(f"{base} already holds a snapshot; choose another directory")
    if os.path.lexists(root) and not os.path.lexists(manifest):
        raise FileExistsError(
            f"{root} exists but {manifest} does not: not a snapshot, refusing to replace it"
        )
    return True


def lies_within(
    path: Optional[Union[str, os.PathLike[str]]], directory: Union[str, os.PathLike[str]]
) -> bool:
    """Whether ``path`` is ``directory`` or lies within it, links resolved."""
    if path is None:
        return False
    inner, outer = os.path.realpath(path), os.path.realpath(directory)
    return inner == outer or inner.startswith(outer.rstrip(os.sep) + os.sep)


def _record_beside(base: Path, source: Host, redact: bool, registry: Optional[Registry]) -> None:
    """Record ``source`` into a new directory beside ``base``, then move the new snapshot into
    ``base`` in place of the old one (other files there are kept); the old one stays whole
    until the recording has succeeded."""
    import tempfile

    stage = Path(tempfile.mkdtemp(prefix=f".{base.name}.", dir=base.parent))
    try:
        _prepare(stage / "new", overwrite=False)
        _record(stage / "new", source, redact, registry)
        if os.path.lexists(base / ROOT):
            os.rename(base / ROOT, stage / "old")
        os.rename(stage / "new" / ROOT, base / ROOT)
        os.replace(stage / "new" / MANIFEST, base / MANIFEST)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


class RecordingHost(HostView):
    """Answers exactly as ``inner`` does and copies every answer into ``tree``.

    Files are copied from ``inner.root`` (hosts whose files live under a local directory:
    :class:`~accelkit.LocalHost`, :class:`FakeHost`, a replayed snapshot), with the symlinks met on
    the way reproduced as symlinks. Commands are kept in :attr:`commands` in snapshot format. The
    environment shows only ``env_names``: the operator's override and exclusion variables are
    left out so every device is detected and recorded, and the replay applies them instead.
    Vendor libraries are unavailable, in-process and in probes.
    """

    def __init__(self, inner: Host, tree: Path, env_names: Iterable[str]) -> None:
        super().__init__(inner, env_names)
        self._tree = tree
        self.commands: list[dict[str, Any]] = []

    # -- files -------------------------------------------------------------------------------
    def read_text(self, path: str) -> Optional[str]:
        text = self.inner.read_text(path)
        self._copy(path, content=_UNREADABLE if text is None else text.encode("utf-8"))
        return text

    def exists(self, path: str) -> bool:
        found = self.inner.exists(path)
        if found:
            self._copy(path)
        return found

    def is_dir(self, path: str) -> bool:
        found = self.inner.is_dir(path)
        if found:
            self._copy(path)
        return found

    def listdir(self, path: str) -> list[str]:
        names = self.inner.listdir(path)
        resolved = self._copy(path)
        if resolved is not None:
            for name in names:
                self._copy_entry(posixpath.join(resolved, name))
        return names

    def readlink(self, path: str) -> Optional[str]:
        target = self.inner.readlink(path)
        if target is not None:
            parent = self._copy(posixpath.dirname(path) or "/")
            if parent is not None:
                self._copy_entry(posixpath.join(parent, posixpath.basename(path)))
        return target

    def realpath(self, path: str) -> Optional[str]:
        real = self.inner.realpath(path)
        self._copy(path)
        return real

    def glob(self, pattern: str) -> list[str]:
        hits = self.inner.glob(pattern)
        for hit in hits:
            self._copy(hit)
        return hits

    def _copy(self, path: str, content: Optional[bytes] = None) -> Optional[str]:
        """Copy ``path`` into the tree, reproducing symlinks on the way; return it resolved.

        ``content`` is written for a file that was read; a file only looked at becomes an
        empty placeholder (never clobbering content recorded before). Missing paths copy nothing.
        """
        source = self.inner.root
        if source is None or not path.startswith("/"):
            return None

        def record(step: str, link: bool, more: bool) -> None:
            if link:
                self._copy_entry(step)
            elif more and (source / step.lstrip("/")).is_dir():
                (self._tree / step.lstrip("/")).mkdir(parents=True, exist_ok=True)

        done = resolve_under(source, path, record)
        if done is None or not (source / done.lstrip("/")).exists():
            return None
        local = source / done.lstrip("/")
        copy = self._tree / done.lstrip("/")
        if local.is_dir():
            copy.mkdir(parents=True, exist_ok=True)
        elif content is not None:
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_bytes(content[:MAX_READ_BYTES])
        elif not copy.exists():
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_bytes(b"")
        return done

    def _copy_entry(self, path: str) -> None:
        """Copy one directory entry as what it is (symlink, directory, placeholder file).

        ``path``'s parent must already be resolved (free of symlinks).
        """
        assert self.inner.root is not None
        local = self.inner.root / path.lstrip("/")
        copy = self._tree / path.lstrip("/")
        if copy.exists() or copy.is_symlink():
            return
        copy.parent.mkdir(parents=True, exist_ok=True)
        if local.is_symlink():
            os.symlink(os.readlink(local), copy)
        elif local.is_dir():
            copy.mkdir()
        elif local.exists():
            copy.write_bytes(b"")

    # -- commands and libraries (the environment is HostView's) -------------------------------
    def run(
        self,
        argv: Sequence[str],
        timeout: Optional[float] = None,
        env: Optional[ProbeEnv] = None,
    ) -> CommandResult:
        entry: dict[str, Any] = {"argv": list(argv)}
        try:
            result = run_on(self.inner, argv, timeout, env)
        except TimeoutError as exc:
            self._keep(entry, error="timeout", message=str(exc))
            raise
        except FileNotFoundError as exc:
            self._keep(entry, error="missing", message=str(exc))
            raise
        except OSError as exc:
            self._keep(entry, error="failed", message=str(exc))
            raise
        self._keep(entry, returncode=result.returncode, stdout=result.stdout, stderr=result.stderr)
        return result

    def _keep(self, entry: dict[str, Any], **answer: Any) -> None:
        """Record a command's first answer (a replay answers each argv one way)."""
        if all(c["argv"] != entry["argv"] for c in self.commands):
            self.commands.append({**entry, **answer})

    def import_module(self, name: str) -> ModuleType:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    def has_library(self, name: str) -> bool:
        return False

    def probe(
        self,
        function: ProbeFunction,
        *args: Any,
        timeout: Optional[float] = None,
        env: Optional[ProbeEnv] = None,
    ) -> Any:
        """Run the probe here, as a replay will: every library import fails."""
        return FakeHost().probe(function, *args, timeout=timeout, env=env)


# -- redaction ---------------------------------------------------------------------------------
_HEX = "[0-9A-Fa-f]"
_UUID_TEXT = f"{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}"
_SECRET = re.compile(
    rf"(?<![0-9A-Za-z])(?P<uuid>{_UUID_TEXT})(?![0-9A-Za-z])"
    rf"|(?<=GPU-|MIG-)(?P<hex>{_HEX}[0-9A-Fa-f-]{{3,}})(?![0-9A-Za-z_])"
    r"|(?P<key>(?i:[a-z_]*(?:serial[a-z_ ]*|board[_ ]?id\b))\"?[ \t]*[:=][ \t]*\"?)"
    r"(?P<serial>[^\s\",]+)"
)
"""UUIDs, the ids after ``GPU-``/``MIG-`` (AMD's are 16 hex digits; CUDA takes prefixes), and
values of serial-number and board-id fields (a board's serial: tt-smi's ``board_id``,
nvidia-smi's ``Board ID``) in text, JSON and ``key: value`` output."""
_UUID = re.compile(_UUID_TEXT)
_SERIAL_FILES = frozenset({"serial", "serial_number", "unique_id", "board_serial"})
"""sysfs files whose whole content is a serial number."""
_NOT_SECRET = frozenset({"", "n/a", "[n/a]", "na", "none", "null", "unknown", "not", "0"})
_SHORTEST_UUID = 6
"""A reported UUID shorter than this is left alone: replacing it wherever it stands as a word
would rewrite unrelated numbers (a UUID ``"1"`` and every count of one), and it names no
machine."""


class _Redactor:
    """Maps each secret to a fake of the same shape, the same fake every time it appears.

    ``uuids`` are the UUIDs detection reported: each one :data:`_SECRET` does not recognise (a
    plugin's own shape, ``ANPU-00000001``) is a secret too, wherever it stands as a word.
    """

    def __init__(self, uuids: Iterable[str]) -> None:
        self._fakes: dict[str, str] = {}
        self._secret = _secret_pattern(uuids)

    def learn(self, text: str) -> None:
        """Register the full UUIDs in ``text`` first, so a prefix can map to its UUID's fake."""
        for found in _UUID.findall(text):
            self._fake(found)

    def text(self, text: str) -> str:
        return self._secret.sub(self._replace, text)

    def file(self, name: str, text: str) -> str:
        """A recorded file: whole-value serial files, then secrets anywhere in the text."""
        value = text.strip()
        if name in _SERIAL_FILES and value.lower() not in _NOT_SECRET:
            return text.replace(value, self._fake(value))
        return self.text(text)

    def _replace(self, match: re.Match[str]) -> str:
        if match["reported"]:
            return self._fake(match["reported"])
        if match["uuid"]:
            return self._fake(match["uuid"])
        if match["hex"]:
            token = match["hex"].lower()
            full = next(
                (k for k in self._fakes if len(k) > len(token) and k.startswith(token)), None
            )
            if full is not None:
                return _same_case(self._fakes[full][: len(token)], match["hex"])
            return self._fake(match["hex"])
        value = match["serial"]
        if value.lower() in _NOT_SECRET:
            return match[0]
        return match["key"] + self._fake(value)

    def _fake(self, value: str) -> str:
        """The fake for ``value``: a ``0x`` prefix and the letters' case are kept."""
        prefix = "0x" if value[:2].lower() == "0x" and len(value) > 2 else ""
        key = value[len(prefix) :].lower()
        if key not in self._fakes:
            n = len(self._fakes) + 1
            if _UUID.fullmatch(key):
                fake = f"{n:08x}-0000-4000-8000-{n:012x}"
            elif key.isdigit():
                fake = str(n).zfill(len(key))
            elif all(c in "0123456789abcdef-" for c in key):
                fake = f"{n:0{len(key)}x}"
            else:
                fake = "r" + str(n).zfill(max(len(key) - 1, 1))
            self._fakes[key] = fake
        return prefix + _same_case(self._fakes[key], value[len(prefix) :])


def _same_case(fake: str, original: str) -> str:
    return fake.upper() if original.isupper() else fake


def _secret_pattern(uuids: Iterable[str]) -> re.Pattern[str]:
    """:data:`_SECRET` with the ``uuids`` it does not recognise in front, as whole words in any
    case (the longest first, so that one which begins another does not cut it)."""
    words = sorted(
        {
            uuid
            for uuid in uuids
            if len(uuid) >= _SHORTEST_UUID
            and uuid.lower() not in _NOT_SECRET
            and _SECRET.search(uuid) is None
        },
        key=lambda uuid: (-len(uuid), uuid),
    )
    alternatives = "|".join(map(re.escape, words)) or "(?!)"  # (?!) matches nothing
    return re.compile(
        rf"(?<![0-9A-Za-z])(?P<reported>(?i:{alternatives}))(?![0-9A-Za-z])|{_SECRET.pattern}"
    )


def _reported_uuids(detection: Detection) -> set[str]:
    """Every UUID the families' ``detect()`` reported: of the devices the node keeps, and of
    those it leaves out (hidden by a visibility variable, withheld, partition parents), whose
    UUIDs are in the recorded outputs all the same."""
    return {
        device.uuid
        for family in detection.families
        for device in (*family.detected, *family.partitioned)
        if device.uuid
    }


def _redact(
    env: dict[str, str], commands: list[dict[str, Any]], tree: Path, uuids: Iterable[str]
) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """Redact the variables, commands and every text file in ``tree`` (in place) alike, the
    reported ``uuids`` among the secrets."""
    files: list[tuple[Path, str]] = []
    for path in sorted(tree.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue
        try:
            files.append((path, data.decode("utf-8")))
        except UnicodeDecodeError:
            continue
    redactor = _Redactor(uuids)
    texts = [*env.values(), *(s for c in commands for s in _command_texts(c))]
    for text in [*texts, *(t for _, t in files)]:
        redactor.learn(text)
    env = {name: redactor.text(value) for name, value in env.items()}
    redacted: list[dict[str, Any]] = []
    for command in commands:
        command = dict(command, argv=[redactor.text(a) for a in command["argv"]])
        for key in ("stdout", "stderr", "message"):
            if key in command:
                command[key] = redactor.text(command[key])
        redacted.append(command)
    for path, text in files:
        new = redactor.file(path.name, text)
        if new != text:
            path.write_bytes(new.encode("utf-8"))
    return env, redacted


def _command_texts(command: Mapping[str, Any]) -> list[str]:
    return [*command["argv"], *(command.get(k, "") for k in ("stdout", "stderr", "message"))]
