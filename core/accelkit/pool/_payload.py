"""A pool's call as bytes for a worker: ``(fn, args, kwargs)`` pickled, and how the worker
imports the caller's ``__main__`` first when the call refers to something defined there."""

from __future__ import annotations

import io
import pickle
import sys
import types
from typing import Any, Callable, Optional

from accelkit.pool._process import main_module

__all__ = ["pickled_call"]

MAIN_NAMES = ("__main__", "__mp_main__")
"""The names the caller's main module goes by: ``__main__`` where it runs as the program, and
``__mp_main__`` in a pool worker (or a ``multiprocessing`` child), which imports it under that
name; what a pool inside a worker sends from there refers to it by the second."""


def pickled_call(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], name: str
) -> tuple[bytes, Optional[tuple[str, str]]]:
    """The call as bytes for a worker, and how the worker imports the caller's ``__main__``
    first to find what the call names there (:func:`~accelkit.pool._process.main_module`;
    None: it names nothing there).

    Functions are pickled by reference, which a worker resolves by importing their module. A
    ``__main__`` without a script (a REPL, a notebook, ``python -c``) cannot be imported, nor
    can a package's ``__main__.py``: ``cloudpickle``, when installed, sends what it defines by
    value; without it, a clear ``pickle.PicklingError`` says so, rather than an
    ``AttributeError`` from the worker.
    """
    try:
        payload = pickle.dumps((fn, args, kwargs))
    except (pickle.PicklingError, AttributeError) as error:  # a lambda, a nested function
        return _by_value((fn, args, kwargs), name, error), None
    if getattr(fn, "__module__", None) not in MAIN_NAMES:  # else it refers to main for sure
        if not _may_name_main(payload):  # the common case, at no cost: nothing can refer to it
            return payload, None
        del payload  # not kept alive while the call is pickled again (both could be large)
        payload, refers = _pickled_noting_main((fn, args, kwargs))
        if not refers:  # the bytes were some string, such as an argument "__main__"
            return payload, None
    main = main_module()
    if main is not None:
        return payload, main
    try:
        import cloudpickle
    except ImportError:
        raise pickle.PicklingError(
            f"{name} is defined in {_unimportable_main()}, which a worker process cannot "
            "import. Install cloudpickle (pip install cloudpickle) to send such functions by "
            "value, or define the function in a module or a script"
        ) from None
    return cloudpickle.dumps((fn, args, kwargs)), None


def _by_value(call: tuple[Any, ...], name: str, error: Exception) -> bytes:
    """``call`` pickled by value with ``cloudpickle``, for what no worker can find by name (a
    lambda, a function defined inside another), as ``ProcessPoolExecutor`` cannot send either;
    without cloudpickle a ``pickle.PicklingError`` says what to do."""
    try:
        import cloudpickle
    except ImportError:
        raise pickle.PicklingError(
            f"{name} cannot be sent to a worker process by name ({error}). Install cloudpickle "
            "(pip install cloudpickle) to send it by value, or define it with def at the top "
            "level of a module or a script"
        ) from None
    payload: bytes = cloudpickle.dumps(call)
    return payload


def _may_name_main(payload: bytes) -> bool:
    """Whether the pickled bytes may refer to the main module: they hold one of its names."""
    return any(name.encode() in payload for name in MAIN_NAMES)


def _unimportable_main() -> str:
    """What the caller's ``__main__`` is, when no worker can import it."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and spec.name == "__main__":  # python DIR, python FILE.zip
        return f"{sys.argv[0]}'s __main__.py (run as a program, which would run it again)"
    if spec is not None:
        return f"{spec.name} (a package's __main__, which would run the program again)"
    return f"an interactive session ({sys.argv[0] or 'the REPL'}: __main__ without a script file)"


def _pickled_noting_main(obj: object) -> tuple[bytes, bool]:
    """``obj`` pickled, and whether it refers to ``__main__`` by name."""
    file = io.BytesIO()
    pickler = _MainNotingPickler(file)
    pickler.dump(obj)
    return file.getvalue(), pickler.refers_to_main


class _MainNotingPickler(pickle.Pickler):
    """A pickler that notes whether what it pickles refers to ``__main__`` by name: a function
    or class defined there, or an instance of such a class (its class is pickled by name). A
    worker finds those only by importing the caller's main module."""

    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file)
        self.refers_to_main = False

    def reducer_override(self, obj: Any) -> Any:
        """Note ``obj``'s module; pickle it as usual (``NotImplemented``)."""
        named = isinstance(obj, (type, types.FunctionType))
        module = getattr(obj, "__module__", None) if named else type(obj).__module__
        if module in MAIN_NAMES:
            self.refers_to_main = True
        return NotImplemented
