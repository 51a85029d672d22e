"""Quantities and placement: the declared placement rule grants exactly what is asked.

Quantity rules need no check of their own since contract version 2: ``validate_quantity`` is
computed from the declarations (``fractional``, ``scheduling.allowed_quantities``), which the
registry's contract check validates, so it cannot disagree with them.
"""

from __future__ import annotations

from accelkit.testing._catalog import check
from accelkit.testing._subject import Subject

WHOLE_COUNTS = (1, 2, 3, 4, 5, 6, 7, 8, 16)
"""Whole-device counts tried when the family allows any whole number."""


@check("quantities")
def placement_sound(subject: Subject) -> None:
    """Placement takes exactly the requested number of free devices, and whole nodes fit."""
    manager = subject.manager
    placement = manager.scheduling.placement
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
    counts = [n for n in (manager.scheduling.allowed_quantities or WHOLE_COUNTS) if n <= len(keys)]
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
