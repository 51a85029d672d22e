"""The futures of a pool's calls: their results in order, and the error of one a broken pool
cannot start."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import BrokenExecutor, Future
from typing import Optional, TypeVar

__all__ = ["broken_pool", "results_in_order"]

T = TypeVar("T")


def results_in_order(futures: deque[Future[T]], deadline: Optional[float]) -> Iterator[T]:
    """Each future's result in turn, waiting until ``deadline`` at most; the futures not yet
    returned are cancelled when a result raises (a ``TimeoutError`` included) or the caller
    stops early (the generator closed)."""
    try:
        while futures:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            result = futures[0].result(left)
            futures.popleft()
            yield result
    finally:
        for future in futures:
            future.cancel()


def broken_pool(cause: BaseException) -> BrokenExecutor:
    """The error of a call that a pool whose dispatcher failed (with ``cause``) cannot start."""
    error = BrokenExecutor(
        f"the pool's dispatcher failed ({type(cause).__name__}: {cause}), so the pool starts "
        "no more calls"
    )
    error.__cause__ = cause
    return error
