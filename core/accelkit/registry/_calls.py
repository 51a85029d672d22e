"""Calling hooks: pluggy's order, each implementation on its own, tracing through pluggy.

pluggy calls a hook's implementations in one loop, so one that raises stops the rest. accelkit
calls them in the same order (``tryfirst``/``trylast`` honoured, later registrations first
otherwise) but one at a time, through a pluggy subset caller per implementation, so a failing
plugin is reported and the others still answer; and because every call goes through pluggy,
``ACCELKIT_TRACE_PLUGINS=1`` is pluggy's own hook-call monitoring.
"""

from __future__ import annotations

import reprlib
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Callable, Optional

import pluggy

from accelkit._faults import PLUGIN_FAULTS

__all__ = ["call_each", "call_one", "trace_to_stderr"]


def call_one(pm: pluggy.PluginManager, hook: str, plugin: object, kwargs: Mapping[str, Any]) -> Any:
    """``plugin``'s implementation of ``hook`` alone; its result (None when it returned None)."""
    others = [p for p in pm.get_plugins() if p is not plugin]
    caller = pm.subset_hook_caller(hook, remove_plugins=others)
    results = caller(**kwargs)
    return results[0] if results else None


def call_each(
    pm: pluggy.PluginManager,
    hook: str,
    kwargs: Mapping[str, Any],
    in_use: Callable[[object], bool],
) -> Iterator[tuple[object, Any, Optional[BaseException]]]:
    """``(plugin, result, error)`` per implementation of ``hook``, in pluggy's call order.

    Only plugins for which ``in_use`` is true are called. ``error`` is the exception the
    implementation raised (``result`` is then None); a None ``result`` without an error is the
    hook's "nothing to add", which the caller skips.
    """
    impls = getattr(pm.hook, hook).get_hookimpls()
    for impl in reversed(impls):  # pluggy calls the last of this list first
        if not in_use(impl.plugin):
            continue
        try:
            result = call_one(pm, hook, impl.plugin, kwargs)
        except PLUGIN_FAULTS as exc:
            yield impl.plugin, None, exc
            continue
        yield impl.plugin, result, None


def trace_to_stderr(pm: pluggy.PluginManager, names: Callable[[object], str]) -> None:
    """Print each hook call, its arguments and outcome to stderr (``ACCELKIT_TRACE_PLUGINS``)."""

    def before(hook: str, impls: Sequence[pluggy.HookImpl], kwargs: Mapping[str, Any]) -> None:
        shown = ", ".join(f"{k}={reprlib.repr(v)}" for k, v in kwargs.items())
        who = ", ".join(names(i.plugin) for i in impls)
        print(f"accelkit trace: {who}.{hook}({shown})", file=sys.stderr)

    def after(
        outcome: pluggy.Result[Any],
        hook: str,
        impls: Sequence[pluggy.HookImpl],
        kwargs: Mapping[str, Any],
    ) -> None:
        if outcome.exception is not None:
            error = outcome.exception
            print(f"accelkit trace:   raised {type(error).__name__}: {error}", file=sys.stderr)
        else:  # one implementation per call: show its result, not pluggy's list of one
            results = outcome.get_result()
            shown = results[0] if isinstance(results, list) and results else None
            print(f"accelkit trace:   -> {reprlib.repr(shown)}", file=sys.stderr)

    pm.add_hookcall_monitoring(before, after)
