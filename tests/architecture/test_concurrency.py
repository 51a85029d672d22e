"""Node detection and the registry from many threads at once: every plugin loads once, and every
thread gets the same node as a detection on its own."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from accelkit import AcceleratorManager, Registry, detect_node, hookimpl, load_snapshot
from accelkit.registry import BUILTIN_PLUGINS

NODES = sorted((Path(__file__).resolve().parents[2] / "examples" / "nodes").iterdir())
THREADS = 12


class Counting:
    """A plugin that counts how often discovery asks it for its managers."""

    __name__ = "counting"

    def __init__(self) -> None:
        self.calls = 0

    @hookimpl
    def accelkit_register_managers(self) -> list[AcceleratorManager]:
        self.calls += 1
        return []


def together(work: Callable[[int], Any]) -> list[Any]:
    """``work(n)`` in THREADS threads released at once; their results, or the first error."""
    barrier = threading.Barrier(THREADS)
    results: list[Any] = [None] * THREADS
    errors: list[BaseException] = []

    def run(n: int) -> None:
        barrier.wait()
        try:
            results[n] = work(n)
        except BaseException as exc:  # re-raised below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results


def test_a_registry_used_from_many_threads_loads_each_plugin_once() -> None:
    counting = Counting()
    modules = [importlib.import_module(m) for m in BUILTIN_PLUGINS]
    plugins = Registry([*modules, counting], autoload=False)
    hosts = [load_snapshot(node) for node in NODES]

    def work(n: int) -> tuple[list[str], list[str], dict[str, Any]]:
        names = [m.name for m in plugins.managers()]
        report = [f"{i.name}:{i.status}" for i in plugins.report()]
        node = detect_node(hosts[n % len(hosts)], registry=plugins)
        return names, report, node.to_dict()

    results = together(work)
    assert counting.calls == 1
    assert len({repr(r[:2]) for r in results}) == 1
    alone = [detect_node(load_snapshot(node), registry=plugins).to_dict() for node in NODES]
    for n, (_, _, node) in enumerate(results):
        assert node == alone[n % len(NODES)], NODES[n % len(NODES)].name


def test_the_default_registry_is_built_once_from_many_threads() -> None:
    from accelkit import registry

    registry.reset()
    built = together(lambda n: registry.default_registry())
    assert all(r is built[0] for r in built)
    nodes = together(lambda n: detect_node(load_snapshot(NODES[0])).to_dict())
    assert all(node == nodes[0] for node in nodes)
