"""A pool's workers live and die with the pool's process, take steps of their own grant, and
take what the caller gives: a ledger by path, a function defined in a session without a script,
in a script or in a main module run with ``python -m``."""

from __future__ import annotations

import json
import pickle
import re
import signal
import subprocess
import sys
import time
import types
from importlib.machinery import ModuleSpec
from pathlib import Path
from typing import Any

import pool_targets as targets
import pytest
from accelkit import Node, Unsatisfiable
from accelkit.ledger._holder import Holder
from accelkit.ledger._ledger import Ledger
from accelkit.pool import _payload
from accelkit.pool._payload import pickled_call
from accelkit.pool._pool import AcceleratorPool
from accelkit.pool._process import main_module
from pool_support import wait_for

PARENT = """
import json, os, sys, time
from pathlib import Path
from accelkit import Node
from accelkit.ledger import Ledger
from accelkit.pool import AcceleratorPool

def hold(started):
    Path(started).write_text(str(os.getpid()))
    time.sleep(600)

if __name__ == "__main__":
    node = Node.from_dict(json.loads(Path(sys.argv[2]).read_text()))
    with AcceleratorPool(node, ledger=Ledger(sys.argv[1], node)) as pool:
        calls = [pool.submit(hold, f"{sys.argv[3]}{n}", resources={"GPU": 2}) for n in range(2)]
        [call.result() for call in calls]
"""


def test_a_pool_killed_with_sigkill_takes_its_workers_and_their_grants_along(
    tmp_path: Path, ledger: Ledger, node_files: dict[str, Path]
) -> None:
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    node_file = node_files["nvidia-h100-8gpu"]
    started = tmp_path / "started"
    parent = subprocess.Popen(
        [sys.executable, str(script), str(ledger.path), str(node_file), str(started)]
    )
    workers = [int(wait_for(Path(f"{started}{n}"))) for n in range(2)]
    held = ledger.view().holdings
    assert sorted(h.holder.pid for h in held) == sorted(workers)
    assert sorted(h.grant.ids["GPU"][0] for h in held) == ["0", "2"]
    parent.send_signal(signal.SIGKILL)
    parent.wait(timeout=60)
    deadline = time.monotonic() + 5
    while ledger.grants():
        assert time.monotonic() < deadline, f"the workers still hold {ledger.grants()}"
        time.sleep(0.05)
    assert all(Holder.of(pid) is None for pid in workers)
    assert ledger.acquire({"GPU": 8}) is not None


def test_a_ledger_is_given_by_path_or_as_a_ledger_and_nothing_else(
    ledger: Ledger, h100: Node
) -> None:
    with AcceleratorPool(h100, ledger=str(ledger.path)) as pool:
        assert pool.submit(targets.visible, resources={"GPU": 1}).result()[2] == "0"
    with pytest.raises(TypeError, match=r"ledger must be an accelkit.ledger.Ledger or the path"):
        AcceleratorPool(h100, ledger=42)  # type: ignore[arg-type]


def test_a_worker_takes_steps_of_its_own_grant(ledger: Ledger, node_files: dict[str, Path]) -> None:
    node_file = str(node_files["nvidia-h100-8gpu"])
    with AcceleratorPool(ledger.node, ledger=ledger) as pool:
        seen, step = pool.submit(targets.take_step, node_file, resources={"GPU": 2}).result()
        nothing = pool.submit(targets.take_step, node_file)
        with pytest.raises(Unsatisfiable, match=r"can never fit in grant \d+ \(nothing\)"):
            nothing.result()  # a call without devices runs on a grant of none
    assert seen == "0,1" and step == {"GPU": ["0"]}


def test_a_call_that_never_fits_the_grant_a_worker_runs_on_is_refused_at_submit(
    ledger: Ledger, node_files: dict[str, Path]
) -> None:
    """Inside a worker holding 2 GPUs a pool's call of 4 (or of 1 inside half a GPU) could never
    run: ``submit`` says so at once, as it does for a call the node could never serve, rather
    than through the call's future; one that fits runs on the grant's first GPU."""
    node_file = str(node_files["nvidia-h100-8gpu"])
    with AcceleratorPool(ledger.node, ledger=ledger) as pool:
        two = pool.submit(targets.submit_inner, node_file, 4, resources={"GPU": 2})
        half = pool.submit(targets.submit_inner, node_file, 1, resources={"GPU": 0.5})
        fits = pool.submit(targets.submit_inner, node_file, 1, resources={"GPU": 2})
        assert re.fullmatch(
            r"refused at submit: Unsatisfiable: GPU=4 can never fit in grant \d+ \(GPU \d,\d\), "
            r"which this process runs on",
            two.result(),
        ), two.result()
        assert re.fullmatch(
            r"refused at submit: Unsatisfiable: GPU=1 can never fit in grant \d+ "
            r"\(GPU \d \(0\.5\)\), which this process runs on",
            half.result(),
        ), half.result()
        assert re.fullmatch(r"ran: \d", fits.result())


SESSION = """
import json, sys
from accelkit import Node
from accelkit.pool import AcceleratorPool
if sys.argv[3] == "without":
    sys.modules["cloudpickle"] = None  # as where it is not installed

def double(x):
    return 2 * x

node = Node.from_dict(json.loads(open(sys.argv[2]).read()))
with AcceleratorPool(node, ledger=sys.argv[1]) as pool:
    for fn, x in ((double, 21), (lambda x: x + 1, 41)):  # a lambda: not even a name to find
        try:
            print(pool.submit(fn, x, resources={"GPU": 1}).result())
        except Exception as error:
            print(type(error).__name__, error)
"""


@pytest.mark.parametrize("cloudpickle", ["with", "without"])
def test_a_function_of_a_session_without_a_script(
    ledger: Ledger, node_files: dict[str, Path], cloudpickle: str
) -> None:
    """A REPL or notebook defines functions in a ``__main__`` no worker can import."""
    if cloudpickle == "with":
        pytest.importorskip("cloudpickle")
    argv = [sys.executable, "-c", SESSION, str(ledger.path), str(node_files["nvidia-h100-8gpu"])]
    result = subprocess.run([*argv, cloudpickle], capture_output=True, text=True, timeout=120)
    if cloudpickle == "with":
        assert result.stdout == "42\n42\n", result.stderr
    else:
        double, anonymous = result.stdout.splitlines()
        assert double.startswith("PicklingError double is defined in an interactive")
        assert "Install cloudpickle" in double
        assert anonymous.startswith("PicklingError <lambda> cannot be sent to a worker process")
        assert "Install cloudpickle" in anonymous and "define it with def" in anonymous


MODULE_MAIN = """
import json, sys
from pathlib import Path
from accelkit import Node
from accelkit.pool import AcceleratorPool
from .helpers import double  # a relative import: this module runs only as part of its package

def task(x):
    return double(x)

if __name__ == "__main__":
    node = Node.from_dict(json.loads(Path(sys.argv[2]).read_text()))
    with AcceleratorPool(node, ledger=sys.argv[1]) as pool:
        print(pool.submit(task, 21, resources={"GPU": 1}).result())
"""


def test_a_function_of_a_main_module_run_with_dash_m(
    ledger: Ledger, node_files: dict[str, Path], tmp_path: Path
) -> None:
    """``python -m jobs.main``: the worker imports ``jobs.main`` by name, as multiprocessing
    does, so its relative imports work (run as a file, they fail)."""
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "__init__.py").write_text("")
    (tmp_path / "jobs" / "helpers.py").write_text("def double(x):\n    return 2 * x\n")
    (tmp_path / "jobs" / "main.py").write_text(MODULE_MAIN)
    argv = [sys.executable, "-m", "jobs.main", str(ledger.path)]
    argv.append(str(node_files["nvidia-h100-8gpu"]))
    result = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert (result.returncode, result.stdout) == (0, "42\n"), result.stderr


def test_how_a_worker_imports_the_callers_main(monkeypatch: pytest.MonkeyPatch) -> None:
    """As multiprocessing does: by name after ``python -m``, by path for a script; never a
    package's ``__main__.py`` (it would run the program again) nor a session without a file."""
    main = types.ModuleType("__main__")
    monkeypatch.setitem(sys.modules, "__main__", main)
    main.__spec__ = ModuleSpec("jobs.main", None)
    assert main_module() == ("name", "jobs.main")
    main.__spec__ = ModuleSpec("jobs.__main__", None)
    assert main_module() is None
    main.__spec__ = None
    main.__file__ = "/work/job.py"
    assert main_module() == ("path", "/work/job.py")
    del main.__file__
    assert main_module() is None


def main_of_a_session(monkeypatch: pytest.MonkeyPatch, file: str | None = None) -> Any:
    """A ``__main__`` as a session has it (no script file: a REPL, ``python -c``) or, given
    ``file``, as a script has it; cloudpickle hidden, as where it is not installed."""
    main = types.ModuleType("__main__")
    main.__spec__ = None
    if file is not None:
        main.__file__ = file
    monkeypatch.setitem(sys.modules, "__main__", main)
    monkeypatch.setitem(sys.modules, "cloudpickle", None)
    return main


def test_an_argument_that_only_says___main___refers_to_nothing_there(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``pool.submit(len, "__main__")`` from ``python -c``: nothing of ``__main__`` is sent,
    so there is nothing to refuse (the pool took the bytes for a reference to it)."""
    main_of_a_session(monkeypatch)
    payload, main = pickled_call(len, ("__main__",), {"name": "__main__"}, "len")
    assert main is None
    assert pickle.loads(payload) == (len, ("__main__",), {"name": "__main__"})


def test_what_is_defined_in___main___is_found_by_importing_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A function or class of the script, or an instance of such a class, however deep in the
    arguments; from a session without a script, submit refuses it without cloudpickle."""
    main = main_of_a_session(monkeypatch, "/work/job.py")

    def double(x: int) -> int:
        return 2 * x

    class Shard:
        pass

    for defined in (double, Shard):
        defined.__module__, defined.__qualname__ = "__main__", defined.__name__
        setattr(main, defined.__name__, defined)
    script = ("path", "/work/job.py")
    assert pickled_call(double, (1,), {}, "double")[1] == script
    assert pickled_call(len, ([{"shard": Shard()}],), {}, "len")[1] == script
    assert pickled_call(len, (), {"kind": Shard}, "len")[1] == script
    del main.__file__
    with pytest.raises(pickle.PicklingError, match="double is defined in an interactive"):
        pickled_call(double, (1,), {}, "double")


def test_a_function_of_the_script_is_pickled_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The function itself names ``__main__``, so its call refers there, whatever else it holds:
    looking through its pickle a second time for what refers there would only double the cost
    of large arguments."""
    main = main_of_a_session(monkeypatch, "/work/job.py")

    def double(x: int) -> int:
        return 2 * x

    double.__module__, double.__qualname__ = "__main__", "double"
    main.double = double

    def second_pass(obj: object) -> None:
        raise AssertionError("the call was pickled a second time")

    monkeypatch.setattr(_payload, "_pickled_noting_main", second_pass)
    payload, script = pickled_call(double, (b"large",), {}, "double")
    assert script == ("path", "/work/job.py")
    assert pickle.loads(payload) == (double, (b"large",), {})


FAILING_MAIN = """
import json, sys
from pathlib import Path
from accelkit import Node
from accelkit.pool import AcceleratorPool

if __name__ == "__mp_main__":  # how a worker imports this script
    raise LookupError("this script only runs as a program")

def task(x):
    return x

if __name__ == "__main__":
    node = Node.from_dict(json.loads(Path(sys.argv[2]).read_text()))
    with AcceleratorPool(node, ledger=sys.argv[1]) as pool:
        for attempt in range(2):  # the same worker answers the second: its main failed once
            error = pool.submit(task, 1, max_calls=0).exception()
            print(json.dumps([type(error).__name__, str(error), str(error.__cause__)]))
        print(pool.submit(len, "abc", max_calls=0).result())  # a call that needs no main
"""


def test_a_main_script_that_fails_in_the_worker_fails_the_call_saying_why(
    ledger: Ledger, node_files: dict[str, Path], tmp_path: Path
) -> None:
    script = tmp_path / "job.py"
    script.write_text(FAILING_MAIN)
    argv = [sys.executable, str(script), str(ledger.path), str(node_files["nvidia-h100-8gpu"])]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    *failures, last = result.stdout.splitlines()
    assert len(failures) == 2
    for line in failures:
        kind, message, cause = json.loads(line)
        assert kind == "RuntimeError"
        assert message == (
            f"the worker could not import the caller's main module ({script}), where the "
            "call's function or arguments are defined: LookupError: this script only runs as "
            "a program"
        )
        assert f'File "{script}", line 8, in <module>' in cause  # the remote traceback
    assert last == "3"


INTERRUPTED_MAIN = """
import json, sys
from pathlib import Path
from accelkit import Node
from accelkit.pool import AcceleratorPool

if __name__ == "__mp_main__":  # Ctrl-C while a worker imports this script
    raise KeyboardInterrupt

def task(x):
    return x

if __name__ == "__main__":
    node = Node.from_dict(json.loads(Path(sys.argv[2]).read_text()))
    pool = AcceleratorPool(node, ledger=sys.argv[1], max_workers=1)
    futures = [pool.submit(task, n, max_calls=0) for n in range(3)]
    print(json.dumps([type(futures[0].exception()).__name__, [f.cancelled() for f in futures]]))
    pool.shutdown()
"""


def test_ctrl_c_while_a_worker_imports_the_main_script_stops_the_queue(
    ledger: Ledger, node_files: dict[str, Path], tmp_path: Path
) -> None:
    """The worker dies of the signal, as it would outside a call, and its pool cancels the calls
    not started. It took the interruption for the script's failure to import, and a reused
    worker failed every later call saying so."""
    script = tmp_path / "job.py"
    script.write_text(INTERRUPTED_MAIN)
    argv = [sys.executable, str(script), str(ledger.path), str(node_files["nvidia-h100-8gpu"])]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == ["WorkerCrashed", [False, True, True]]


def test_a_worker_whose_pool_ended_before_it_started_exits_at_once() -> None:
    """The pool may die between starting a worker and the worker asking for the parent-death
    signal: the worker then finds another parent, and ends before serving anything."""
    probe = "from accelkit.pool import _child; _child._end_with(1); print('served')"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert (result.returncode, result.stdout) == (70, ""), result.stderr


APP = """
import json, sys
from accelkit import Node
from accelkit.pool import AcceleratorPool

def double(x):
    return 2 * x

if __name__ == "__main__":
    sys.modules["cloudpickle"] = None  # as where it is not installed
    node = Node.from_dict(json.loads(open(sys.argv[2]).read()))
    with AcceleratorPool(node, ledger=sys.argv[1]) as pool:
        try:
            print(pool.submit(double, 21).result())
        except Exception as error:
            print(type(error).__name__, error)
"""


def test_a_directory_run_as_a_program_is_named_as_such(
    ledger: Ledger, node_files: dict[str, Path], tmp_path: Path
) -> None:
    """``python appdir/`` runs ``appdir/__main__.py`` as ``__main__`` with no package: the
    message says so, not "a package's __main__"."""
    app = tmp_path / "appdir"
    app.mkdir()
    (app / "__main__.py").write_text(APP)
    argv = [sys.executable, str(app), str(ledger.path), str(node_files["nvidia-h100-8gpu"])]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert result.stdout.startswith(
        f"PicklingError double is defined in {app}'s __main__.py (run as a program"
    ), result.stdout + result.stderr
    assert "package" not in result.stdout
