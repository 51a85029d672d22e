"""Quantities and placement: validation agrees with the declaration; placements are sound."""

from __future__ import annotations

from typing import Union

from accelkit.errors import InvalidRequest
from accelkit.quantities import UNIT
from accelkit.testing.catalog import check
from accelkit.testing.subject import Subject

ALWAYS_INVALID: tuple[object, ...] = (-1, float("nan"), float("inf"), "one", 2.5, 0.00001)
"""Quantities no family may accept."""

WHOLE_COUNTS = (1, 2, 3, 4, 5, 6, 7, 8, 16)


def _rejection(subject: Subject, quantity: object) -> str:
    """The message validate_quantity raises for ``quantity``; fails if it accepts it."""
    try:
        units = subject.manager.validate_quantity(quantity)
    except InvalidRequest as exc:
        return str(exc)
    except Exception as exc:
        raise AssertionError(
            f"{subject.label}.validate_quantity({quantity!r}) raised {type(exc).__name__}: "
            f"{exc}; it must raise accelkit.InvalidRequest"
        ) from exc
    raise AssertionError(
        f"{subject.label}.validate_quantity({quantity!r}) accepted it as {units} units; "
        f"expected a rejection ({_declared(subject)})"
    )


def _declared(subject: Subject) -> str:
    manager = subject.manager
    return f"fractional={manager.fractional}, allowed_quantities={manager.allowed_quantities}"


def _invalid(subject: Subject) -> list[object]:
    manager = subject.manager
    wrong: list[object] = list(ALWAYS_INVALID)
    if not manager.fractional:
        wrong.append(0.5)
    if manager.allowed_quantities is not None:
        wrong.extend(n for n in WHOLE_COUNTS if n not in manager.allowed_quantities)
    return wrong


@check("quantities")
def quantity_rule(subject: Subject) -> None:
    """validate_quantity accepts exactly what fractional and allowed_quantities declare."""
    manager = subject.manager
    allowed = manager.allowed_quantities
    accepted: list[Union[int, float]] = [n for n in WHOLE_COUNTS if allowed is None or n in allowed]
    if manager.fractional:
        accepted += [0.5, 0.25, 0.0001]
    for quantity in accepted:
        try:
            units = manager.validate_quantity(quantity)
        except InvalidRequest as exc:
            raise AssertionError(
                f"{subject.label}.validate_quantity({quantity!r}) was rejected ({exc}), but "
                f"the declaration allows it ({_declared(subject)})"
            ) from exc
        expected = round(quantity * UNIT)
        assert units == expected, (
            f"{subject.label}.validate_quantity({quantity!r}) gave {units} units; expected "
            f"{expected} (1 device is {UNIT} units)"
        )
    for wrong in _invalid(subject):
        _rejection(subject, wrong)


@check("quantities")
def rejection_names_value(subject: Subject) -> None:
    """Every rejected quantity's message names the value that was wrong."""
    for quantity in _invalid(subject):
        message = _rejection(subject, quantity)
        assert repr(quantity) in message or str(quantity) in message, (
            f"{subject.label}.validate_quantity({quantity!r}) raised {message!r}, which does "
            "not name the value; say what was asked and what would be right"
        )


@check("quantities")
def placement_sound(subject: Subject) -> None:
    """Placement takes exactly the requested number of free devices, and whole nodes fit."""
    manager = subject.manager
    placement = manager.placement
    devices = subject.sample_devices()
    ids = [d.id for d in devices]
    if placement.keyed_by_id:
        assert all(i.isdigit() for i in ids), (
            f"{subject.label}: placement {placement!r} is keyed by numeric id, but detection "
            f"gives ids {ids}"
        )
    keys = placement.keys(devices)
    assert len(set(keys)) == len(keys), f"{subject.label}: placement keys repeat: {keys}"
    full = sum(1 << k for k in keys)
    counts = [n for n in (manager.allowed_quantities or WHOLE_COUNTS) if n <= len(keys)]
    for count in counts:
        assert placement.choose(full, count) is not None, (
            f"{subject.label}: placement {placement!r} cannot place {count} device(s) on a free "
            f"node with keys {keys}"
        )
    for free in range(1 << min(len(keys), 8)):
        free_keys = sum(1 << keys[b] for b in range(len(keys)) if free >> b & 1)
        for count in counts:
            chosen = placement.choose(free_keys, count)
            if chosen is None:
                continue
            assert chosen & ~free_keys == 0 and bin(chosen).count("1") == count, (
                f"{subject.label}: placement {placement!r}.choose({bin(free_keys)}, {count}) "
                f"gave {bin(chosen)}: it must take exactly {count} free device(s)"
            )
