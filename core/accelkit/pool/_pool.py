"""``AcceleratorPool``: a ``concurrent.futures`` executor whose calls run on granted devices.

Each call names the resources it needs (``resources={"GPU": 0.5}``). The pool takes a grant for
it from the node's :class:`~accelkit.ledger.Ledger` (so pools and ``accelkit run`` on one
machine never hand out a device twice), starts a worker process with the grant's visibility
environment (set before the function's module is imported), and makes that process the grant's
holder: the grant lives exactly as long as the process that may hold device memory.

``max_calls`` follows the seeds: 1 (the default for calls that use accelerator devices) gives
each call a fresh process, because frameworks keep device memory until their process exits; 0
(the default for calls without devices) reuses a worker without limit; N recycles it after N
calls. An idle worker keeps its grant, and serves later calls with the same request; the pool
stops idle workers when it needs their room. Calls wait in submission order.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Executor, Future
from concurrent.futures import wait as wait_for_futures
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, Optional, TypeVar, Union

from accelkit.errors import WorkerCrashed
from accelkit.ledger._identity import fingerprint
from accelkit.ledger._ledger import Ledger
from accelkit.pool import _exit
from accelkit.pool._futures import broken_pool, results_in_order
from accelkit.pool._payload import pickled_call
from accelkit.pool._process import WorkerProcess
from accelkit.pool._workers import Handover, warn_not_stopped
from accelkit.schedule._request import request_key, validate_request

if TYPE_CHECKING:
    from accelkit.node._record import Node
    from accelkit.registry import Registry

__all__ = ["AcceleratorPool"]

T = TypeVar("T")


@dataclass
class _Call:
    """A submitted call: what to run, what it needs, and which workers may run it."""

    future: Future[Any]
    payload: bytes
    main: Optional[tuple[str, str]]
    name: str
    request: dict[str, object]
    key: Any
    cancelling: bool = False
    """Held back, to be cancelled once the pool's lock is released (:meth:`_hold_back`)."""


class AcceleratorPool(Executor):
    """Run calls in worker processes that see exactly the devices granted to them.

    ``node`` None: the ledger's node (detected). ``max_workers`` None: the larger of the CPU
    count and the node's device count. ``ledger``: a :class:`~accelkit.ledger.Ledger`, or the
    path of one; None: the node's default ledger, the one ``accelkit run`` uses. ``registry``
    serves the families' plugins (None: the default one). Workers end with the pool's process,
    however it ends, and their grants return with them.
    """

    def __init__(
        self,
        node: Optional[Node] = None,
        max_workers: Optional[int] = None,
        *,
        ledger: Union[Ledger, str, os.PathLike[str], None] = None,
        registry: Optional[Registry] = None,
    ) -> None:
        if max_workers is not None and (not isinstance(max_workers, int) or max_workers < 1):
            raise ValueError(f"max_workers must be a whole number above 0, not {max_workers!r}")
        if isinstance(ledger, Ledger):
            self._ledger = ledger
        elif ledger is None or isinstance(ledger, (str, os.PathLike)):
            self._ledger = Ledger(ledger, node, registry=registry)
        else:
            raise TypeError(
                f"ledger must be an accelkit.ledger.Ledger or the path of one, not {ledger!r} "
                f"({type(ledger).__name__})"
            )
        self._node = node if node is not None else self._ledger.node
        if fingerprint(self._node) != fingerprint(self._ledger.node):
            raise ValueError(
                f"the pool's node ({fingerprint(self._node)['summary']}) is not the node of "
                f"its ledger {self._ledger.path} ({fingerprint(self._ledger.node)['summary']}): "
                "give the ledger that node, or leave node out"
            )
        self._registry = registry
        self._pid = os.getpid()  # a forked child's copy of the pool is none of its own
        self._handover = Handover(self._ledger, registry)
        self._max_workers = max_workers or max(os.cpu_count() or 1, len(self._node.devices))
        self._device_resources = {d.resource_name for d in self._node.devices}
        self._pending: deque[_Call] = deque()
        self._idle: list[WorkerProcess] = []
        self._busy = 0
        self._settling: set[Future[Any]] = set()  # no longer busy, their outcome being set
        self._condition = threading.Condition()
        self._closing = False
        self._dispatcher: Optional[threading.Thread] = None
        self._broken: Optional[BaseException] = None  # what failed the dispatcher

    # -- the Executor interface --------------------------------------------------------------
    def submit(  # type: ignore[override]
        self,
        fn: Callable[..., T],
        /,
        *args: Any,
        resources: Optional[Mapping[str, object]] = None,
        max_calls: Optional[int] = None,
        **kwargs: Any,
    ) -> Future[T]:
        """Schedule ``fn(*args, **kwargs)`` on a worker holding ``resources``.

        ``max_calls`` None: 1 when ``resources`` names a device resource of the node (a fresh
        process per call), else 0 (reuse). ``fn`` and its arguments must pickle; a function
        of the ``__main__`` script is found by importing that script in the worker (guard its
        top-level work with ``if __name__ == "__main__":``, as for ``multiprocessing``), and one
        defined in a session without a script (a REPL, a notebook) is sent by value with
        ``cloudpickle`` when it is installed.

        Raises at once: :class:`~accelkit.Unsatisfiable` for a request this node (or the grant
        this process runs on, or the devices it sees) can never serve,
        :class:`~accelkit.InvalidRequest` for a malformed one, ``ValueError`` for a bad
        ``max_calls``, pickling errors for a call that cannot be sent to a process, and
        ``RuntimeError`` after :meth:`shutdown`, and in a process forked from the pool's.
        """
        if os.getpid() != self._pid:
            raise RuntimeError(
                f"this pool is process {self._pid}'s, from which this process (pid "
                f"{os.getpid()}) was forked: its workers and the thread that starts calls are "
                "there, not here, so a call submitted here would never run. Make a pool in this "
                "process"
            )
        request = dict(resources or {})
        validate_request(request, self._node, registry=self._registry)
        self._ledger.refuse_never_fitting(request)
        if max_calls is None:
            max_calls = 1 if self._device_resources.intersection(request) else 0
        if isinstance(max_calls, bool) or not isinstance(max_calls, int) or max_calls < 0:
            raise ValueError(
                f"max_calls must be 0 (reuse without limit), 1 (a fresh process per call) or "
                f"a larger whole number (recycle after that many calls), not {max_calls!r}"
            )
        name = getattr(fn, "__qualname__", repr(fn))
        payload, main = pickled_call(fn, args, kwargs, name)
        future: Future[T] = Future()
        key = (request_key(request), max_calls)
        call = _Call(future, payload, main, name, request, key)
        with self._condition:
            if self._broken is not None:
                raise broken_pool(self._broken)
            if self._closing:
                raise RuntimeError("cannot schedule new calls after shutdown")
            if self._dispatcher is None:
                self._dispatcher = self._start_dispatcher()
            self._pending.append(call)
            self._condition.notify_all()
        return future

    def map(
        self,
        fn: Callable[..., T],
        *iterables: Iterable[Any],
        timeout: Optional[float] = None,
        chunksize: int = 1,
        resources: Optional[Mapping[str, object]] = None,
        max_calls: Optional[int] = None,
    ) -> Iterator[T]:
        """``fn`` over the arguments, each call on a worker holding ``resources`` and with
        ``max_calls`` as in :meth:`submit`: ``Executor.map``, whose calls could name no
        device and so ran with every device hidden. Every call is submitted before this
        returns (what ``submit`` refuses, ``map`` raises); results come in order, each waited
        for until ``timeout`` seconds after the call (``TimeoutError``), and the calls not yet
        returned are cancelled when the iterator is closed or fails. ``chunksize`` is taken and
        not used, as in ``ThreadPoolExecutor``: each call is a process's call already."""
        deadline = None if timeout is None else time.monotonic() + timeout
        futures = deque(
            self.submit(fn, *args, resources=resources, max_calls=max_calls)
            for args in zip(*iterables)
        )
        return results_in_order(futures, deadline)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """No more calls; with ``cancel_futures`` drop those not started; with ``wait`` return
        once every call has finished and every worker has stopped (grants given back). Without
        ``wait`` the calls still run: the interpreter waits for them at exit.

        A future's done-callback may call this: its own future is done by then, and the others
        are waited for until they are done, not until their callbacks have returned (which
        could be waiting for this one).

        In a process forked from the pool's, this does nothing: the pool's workers and calls
        are its parent's (and a thread of the parent may have held the pool's lock at the
        fork, which nothing would release here)."""
        if os.getpid() != self._pid:
            return
        with self._condition:
            self._closing = True
            held = self._hold_back() if cancel_futures else []
            self._condition.notify_all()
            dispatcher = self._dispatcher
        self._cancel(held)
        if dispatcher is None:
            return
        if wait:
            dispatcher.join()
            with self._condition:
                settling = list(self._settling)
            wait_for_futures(settling)

    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc_value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        """``shutdown(wait=True)``, as for every executor, except that a block left by Ctrl-C
        (``KeyboardInterrupt``) also cancels the calls not started.

        The terminal's SIGINT reaches the workers too (one process group), so the calls running
        stop with it; the queue would then start call after call, each on a fresh grant, and
        Ctrl-C would mean "run the rest". ``concurrent.futures`` executors do that, but a user
        who presses Ctrl-C asks for the work to stop. (A worker that the signal interrupts has
        the pool cancel them at once, :meth:`_serve`; this covers a Ctrl-C while none ran.)
        Another exception leaves the queue to run, as there."""
        interrupted = exc_type is not None and issubclass(exc_type, KeyboardInterrupt)
        self.shutdown(wait=True, cancel_futures=interrupted)

    # -- dispatching -------------------------------------------------------------------------
    def _start_dispatcher(self) -> threading.Thread:
        """The thread that serves this pool's calls, which the interpreter waits for at exit."""
        _exit.register(self)
        dispatcher = threading.Thread(target=self._dispatch, name="accelkit-pool", daemon=True)
        dispatcher.start()
        return dispatcher

    def _dispatch(self) -> None:
        """Serve calls in submission order until shut down and drained, then stop the workers.

        Should dispatching itself fail, the calls not started fail with the cause, and the pool
        takes no more: otherwise their futures would wait for a thread that is gone."""
        try:
            self._dispatch_calls()
        except BaseException as error:
            self._break(error)
        self._wind_down()

    def _dispatch_calls(self) -> None:
        """Start each call on a worker, in submission order, until shut down and drained."""
        while True:
            self._handover.give_back_kept()  # grants the ledger failed to hand to a worker
            with self._condition:
                call = self._next_call()
                if call is None:
                    if self._closing and not self._pending:
                        return
                    continue  # kept grants to offer back first
                worker = self._reusable(call)
                spare = None
                if worker is None and self._busy + len(self._idle) >= self._max_workers:
                    spare = self._idle.pop(0) if self._idle else None
                    if spare is None:
                        self._condition.wait(self._handover.retry_in)  # every worker is busy
                        continue
            if spare is not None:
                self._retire(spare)
                continue
            if worker is None:
                try:
                    worker = self._start_worker(call)
                except BaseException as error:  # the ledger, or the process, failed this call
                    self._fail(call, error)
                    continue
                if worker is None:
                    continue
            self._run(worker, call)

    def _next_call(self) -> Optional[_Call]:
        """The first call still wanted; lock held. None: shut down and nothing left, or kept
        grants to offer back first (:attr:`Handover.retry_in`), every few seconds and before a
        new call, which may need their room. Cancelled calls are dropped, their waiters told:
        ``concurrent.futures.wait`` and ``as_completed`` count a cancelled future as done only
        once its executor has said it will not run it."""
        while True:
            while self._pending and self._pending[0].future.cancelled():
                self._pending.popleft().future.set_running_or_notify_cancel()
            if self._pending and not self._pending[0].cancelling:
                return self._pending[0]
            if self._closing and not self._pending:
                return None
            self._condition.wait(self._handover.retry_in)
            if self._handover.retry_in is not None:
                return None

    def _hold_back(self) -> list[_Call]:
        """Mark the calls not started, for :meth:`_cancel`; lock held. The dispatcher starts
        none of them meanwhile: the lock is released first, because ``Future.cancel`` runs
        done-callbacks, which may call the pool (``shutdown``)."""
        for call in self._pending:
            call.cancelling = True
        return list(self._pending)

    def _cancel(self, held: list[_Call]) -> None:
        """Cancel the calls :meth:`_hold_back` marked, then let the dispatcher drop them (it
        alone takes calls off the queue: it may be starting the first)."""
        if not held:
            return
        for call in held:
            call.future.cancel()
        with self._condition:
            self._condition.notify_all()

    def _break(self, error: BaseException) -> None:
        """Fail every call not started with ``error`` as the cause; refuse calls from now on."""
        with self._condition:
            self._broken = error
            pending, self._pending = self._pending, deque()
        for call in pending:
            if call.future.set_running_or_notify_cancel():
                call.future.set_exception(broken_pool(error))

    def _wind_down(self) -> None:
        """Wait for the running calls, then stop the workers they leave idle (their grants go
        back with them), and give back the grants the ledger failed to hand to a worker."""
        with self._condition:
            while self._busy:
                self._condition.wait()
            idle, self._idle = self._idle, []
        failed: list[tuple[WorkerProcess, Exception]] = []
        for worker in idle:  # every worker is stopped before any failure is reported
            try:
                self._retire(worker)
            except Exception as error:
                failed.append((worker, error))
        self._handover.give_back_kept(last=True)
        for worker, failure in failed:
            if isinstance(failure, Warning):  # -W error: the worker stopped; its warning is raised
                raise failure
            warn_not_stopped(worker, failure)

    def _reusable(self, call: _Call) -> Optional[WorkerProcess]:
        """An idle worker made for this kind of call; lock held. Idle workers found dead
        (killed between calls) are retired on the way, which gives their grants back."""
        for worker in list(self._idle):
            if not worker.alive():
                self._idle.remove(worker)
                self._retire(worker)
            elif worker.key == call.key:
                self._idle.remove(worker)
                return worker
        return None

    def _start_worker(self, call: _Call) -> Optional[WorkerProcess]:
        """A new worker holding a fresh grant for ``call`` (None: try again, something changed)."""

        def changed() -> bool:
            with self._condition:
                return call.future.cancelled() or bool(self._idle)

        note = f"accelkit pool worker, for pid {os.getpid()}"  # what ps shows for the worker
        grant = self._ledger.acquire(call.request, wait=True, stop=changed, note=note)
        if grant is None:
            with self._condition:
                reusable = any(worker.key == call.key for worker in self._idle)
                spare = self._idle.pop(0) if self._idle and not reusable else None
            if spare is not None:
                self._retire(spare)  # its grant may be the room this call waits for
            return None
        return self._handover.start(grant, call.key)

    def _fail(self, call: _Call, error: BaseException) -> None:
        """Fail a call that never started."""
        with self._condition:
            if self._pending and self._pending[0] is call:
                self._pending.popleft()
        if call.future.set_running_or_notify_cancel():
            call.future.set_exception(error)

    def _run(self, worker: WorkerProcess, call: _Call) -> None:
        """Start ``call`` on ``worker`` in a thread of its own (or give the worker back if the
        call was cancelled meanwhile)."""
        with self._condition:
            if self._pending and self._pending[0] is call:
                self._pending.popleft()
            if not call.future.set_running_or_notify_cancel():
                self._idle.append(worker)
                return
            self._busy += 1
        try:
            started = _exit.start_thread(self._serve, worker, call)
        except BaseException as error:  # no thread to serve it (a thread limit): the pool breaks
            self._put_away(worker, stop=True)
            self._settle(call, error=error)
            raise
        if not started:  # the interpreter exits, and this Python starts no thread then
            self._serve(worker, call)

    def _serve(self, worker: WorkerProcess, call: _Call) -> None:
        """Run the call, keep or stop its worker, then settle the future. The future is settled
        whatever fails on the way: a thread that died here would lose the call's outcome, and
        leave the call busy, so ``shutdown(wait=True)`` would wait for it forever.

        A worker interrupted by SIGINT (Ctrl-C, which reaches the pool's process too) holds
        back the calls not started before its slot is freed, and cancels them once this call is
        settled: the next call would otherwise start on
        a fresh worker, which the signal never reached, before the pool's main thread gets to
        raise ``KeyboardInterrupt`` (at once when it waits, but not while it runs C code), and
        the with block's exit would then wait for that whole call."""
        result: Any = None
        error: Optional[BaseException] = None
        try:
            result = worker.call(call.payload, call.main, call.name)
        except BaseException as raised:
            error = raised
        held: list[_Call] = []
        if worker.interrupted(error):
            with self._condition:
                held = self._hold_back()
        try:
            self._put_away(worker, stop=isinstance(error, WorkerCrashed))
        finally:
            try:
                self._settle(call, result=result, error=error)
            finally:  # after this call is done (a callback may wait for it), and whatever failed
                self._cancel(held)  # the dispatcher waits for the calls held back

    def _put_away(self, worker: WorkerProcess, *, stop: bool) -> None:
        """Keep a worker for more calls, or stop it (when asked to, once it has served
        ``max_calls``, or when it has died).

        A failure here is not the call's: the call has its outcome, which must reach its future.
        It is reported as a warning instead."""
        limit = worker.key[1]
        try:
            if stop or (limit and worker.calls >= limit) or not worker.alive():
                self._retire(worker)
            else:
                with self._condition:
                    self._idle.append(worker)
        except Exception as error:
            warn_not_stopped(worker, error)

    def _settle(
        self, call: _Call, *, result: Any = None, error: Optional[BaseException] = None
    ) -> None:
        """Free the call's slot, then give the future its outcome.

        The slot goes first because setting the outcome runs the future's done-callbacks, here:
        one that submits a call and waits for it needs the slot, and one that shuts the pool
        down waits for the dispatcher, which waits for nothing busy. Until its future is done,
        the call is in ``_settling``, which ``shutdown(wait=True)`` waits for."""
        with self._condition:
            self._busy -= 1
            self._settling.add(call.future)
            self._condition.notify_all()
        try:
            if error is None:
                call.future.set_result(result)
            else:
                call.future.set_exception(error)
        finally:
            with self._condition:
                self._settling.discard(call.future)

    def _retire(self, worker: WorkerProcess) -> None:
        """Stop a worker and give its grant back (:meth:`Handover.retire`), then let the
        dispatcher look again: the grant may be the room a call waits for."""
        self._handover.retire(worker)
        with self._condition:
            self._condition.notify_all()
