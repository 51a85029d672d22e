"""Every error accelkit raises on purpose is an ``AccelkitError`` and also the built-in exception
that callers caught before it had a class of its own, wherever it is imported from."""

from __future__ import annotations

import accelkit
import accelkit.host
import accelkit.registry
import pytest
from accelkit import errors


@pytest.mark.parametrize("name", sorted(set(errors.__all__) - {"PluginWarning"}))
def test_each_error_is_an_accelkit_error(name: str) -> None:
    assert issubclass(getattr(errors, name), errors.AccelkitError)


@pytest.mark.parametrize(
    ("error", "builtin"),
    [
        (errors.UnknownFamily, KeyError),
        (errors.ProbeError, RuntimeError),
        (errors.InvalidRequest, ValueError),
        (errors.Unsatisfiable, ValueError),
        (errors.InvalidData, ValueError),
        (errors.ConfigurationError, ValueError),
        (errors.PluginError, RuntimeError),
        (errors.LedgerError, RuntimeError),
        (errors.WorkerCrashed, RuntimeError),
    ],
)
def test_existing_except_clauses_keep_working(error: type[Exception], builtin: type) -> None:
    assert issubclass(error, builtin)


def test_the_old_import_paths_name_the_same_classes() -> None:
    assert accelkit.UnknownFamily is accelkit.registry.UnknownFamily is errors.UnknownFamily
    assert accelkit.ProbeError is accelkit.host.ProbeError is errors.ProbeError


def test_unknown_family_reads_as_its_sentence_and_probe_error_says_if_it_crashed() -> None:
    assert str(errors.UnknownFamily("no accelerator family 'x'")) == "no accelerator family 'x'"
    assert errors.ProbeError("died", crashed=True).crashed
    assert not errors.ProbeError("raised").crashed
