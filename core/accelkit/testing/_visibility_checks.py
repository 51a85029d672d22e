"""Visibility: what a grant writes reads back as exactly the granted ids, in every shape."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Optional

from accelkit._visibility import NOTHING_VISIBLE
from accelkit.testing._catalog import check
from accelkit.testing._subject import Skipped, Subject

Env = dict[str, str]


def _apply(base: Mapping[str, str], changes: Mapping[str, Optional[str]]) -> Env:
    """``base`` with a visibility_env applied: None unsets, a string sets."""
    env = dict(base)
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def _subsets(subject: Subject, ids: Sequence[str]) -> list[list[str]]:
    """Id lists a grant could hold under the family's placement rule, from several free sets."""
    manager = subject.manager
    placement = manager.scheduling.placement
    keys = list(range(len(ids)))
    if placement.keyed_by_id and all(i.isdigit() for i in ids):
        keys = [int(i) for i in ids]
    by_key = dict(zip(keys, ids))
    full = sum(1 << k for k in keys)
    allowed = manager.scheduling.allowed_quantities or range(1, len(ids) + 1)
    found: list[list[str]] = []
    for free in [full, *(full & ~(1 << k) for k in keys)]:
        for count in allowed:
            mask = placement.choose(free, count)
            if not mask:
                continue
            chosen = [by_key[k] for k in sorted(by_key) if mask >> k & 1]
            if chosen not in found:
                found.append(chosen)
    return found


def _read_back(subject: Subject, env: Mapping[str, str], ids: Sequence[str]) -> None:
    """Assert ``read_visible(env)`` names ``ids`` (None is accepted for every id: unrestricted)."""
    seen = subject.manager.read_visible(env)
    every = list(subject.sample_ids())
    assert seen == list(ids) or (seen is None and sorted(ids) == sorted(every)), (
        f"{subject.label}.read_visible({env!r}) gave {seen!r}; the grant was for {list(ids)!r}"
    )


@check("visibility")
def unset_is_unrestricted(subject: Subject) -> None:
    """With none of the family's variables set, read_visible says unrestricted (None)."""
    seen = subject.manager.read_visible({})
    assert seen is None, f"{subject.label}.read_visible({{}}) gave {seen!r}; expected None"


@check("visibility")
def round_trip(subject: Subject) -> None:
    """visibility_env(ids) reads back as ids, alone and over an inherited restriction."""
    ids = subject.sample_ids()
    manager = subject.manager
    inherited = _apply({}, manager.visibility_env(ids[:1]))
    for chosen in _subsets(subject, ids):
        written = manager.visibility_env(chosen)
        _read_back(subject, _apply({}, written), chosen)
        _read_back(subject, _apply(inherited, written), chosen)


@check("visibility")
def nothing_visible(subject: Subject) -> None:
    """visibility_env([]) hides every device, and each sentinel ('' , NoDevFiles) reads as []
    ('' may read as None, not set, where the runtime reads it so: SYCL's selector)."""
    manager = subject.manager
    inherited = _apply({}, manager.visibility_env(subject.sample_ids()))
    env = _apply(inherited, manager.visibility_env([]))
    seen = manager.read_visible(env)
    assert seen == [], (
        f"{subject.label}.visibility_env([]) gives {env!r}, which reads back as {seen!r}; "
        "hiding every device must read back as []"
    )
    variable = manager.visible_devices_env_var
    if variable is None:
        return
    for sentinel in NOTHING_VISIBLE:
        seen = manager.read_visible({variable: sentinel})
        read_as_unset = sentinel == "" and seen is None
        assert seen == [] or read_as_unset, (
            f"{subject.label}.read_visible({{{variable!r}: {sentinel!r}}}) gave {seen!r}; "
            "a 'nothing visible' value must read as [] (or, for '', None where the runtime "
            "reads an empty value as not set)"
        )


@check("visibility")
def no_whitespace_written(subject: Subject) -> None:
    """Nothing visibility_env writes contains whitespace (runtimes stop at a space)."""
    manager = subject.manager
    for chosen in [[], *_subsets(subject, subject.sample_ids())]:
        for key, value in manager.visibility_env(chosen).items():
            assert value is None or isinstance(value, str), (
                f"{subject.label}.visibility_env({chosen!r}) sets {key} to {value!r}; values "
                "are str (set) or None (unset)"
            )
            assert value is None or not any(ch.isspace() for ch in value), (
                f"{subject.label}.visibility_env({chosen!r}) writes {key}={value!r}, with "
                "whitespace; write ids without any"
            )


@check("visibility")
def whitespace_tolerated(subject: Subject) -> None:
    """Spaces around the ids visibility_env writes read as the runtime reads them: the ids (most
    runtimes), or the ids before the first spaced one (CANN stops there); never a spaced id."""
    manager = subject.manager
    variable = manager.visible_devices_env_var
    if variable is None:
        raise Skipped("the family declares no visible_devices_env_var")
    subsets = [s for s in _subsets(subject, subject.sample_ids()) if len(s) > 1] or [
        subject.sample_ids()[:1]
    ]
    for chosen in subsets:
        env = _apply({}, manager.visibility_env(chosen))
        value = env.get(variable)
        if value is None:
            continue
        env[variable] = " " + value.replace(",", " , ") + " "
        seen = manager.read_visible(env)
        assert seen is not None and seen == list(chosen)[: len(seen)], (
            f"{subject.label}.read_visible({env!r}) gave {seen!r}; the grant was for "
            f"{list(chosen)!r} (a runtime that stops at a space may show a prefix of it)"
        )
