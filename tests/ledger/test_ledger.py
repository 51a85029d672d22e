"""``Ledger``: grants shared by processes through one file, decided by the allocator's rules."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from accelkit import InvalidRequest, LedgerError, Node, Unsatisfiable
from accelkit.ledger import _file as ledger_file
from accelkit.ledger._holder import Holder, boot_id
from accelkit.ledger._ledger import Ledger
from accelkit.ledger._state import LedgerState, Ticket
from ledger_support import HoldingProcess, hold_in_turn, run


def test_acquire_release_and_grants(ledger_path: Path, h100: Node) -> None:
    ledger = Ledger(ledger_path, h100)
    first = ledger.acquire({"GPU": 2})
    second = ledger.acquire({"GPU": 1}, accelerator_type="H100")
    assert first is not None and second is not None
    assert first.ids == {"GPU": ["0", "1"]} and second.ids == {"GPU": ["2"]}
    assert ledger.grants() == [first, second]
    ledger.release(first)
    assert ledger.grants() == [second]
    with pytest.raises(InvalidRequest, match="released already"):
        ledger.release(first)
    data = json.loads(ledger_path.read_text())
    assert data["version"] == 4
    assert data["grants"][0]["holder"] == Holder.current().to_dict()
    assert data["grants"][0]["user"] == os.getuid() and data["grants"][0]["parent"] is None


def test_env_refuses_a_string_hide_others_whatever_the_node(ledger_path: Path, h100: Node) -> None:
    ledger = Ledger(ledger_path, h100)
    grant = ledger.acquire({"GPU": 1})
    assert grant is not None
    with pytest.raises(TypeError, match="not the string 'amd'"):
        ledger.env(grant, {}, hide_others="amd")  # type: ignore[arg-type]
    ledger.release(grant)


def test_two_ledger_objects_on_one_file_never_hand_out_a_device_twice(
    ledger_path: Path, h100: Node
) -> None:
    one, two = Ledger(ledger_path, h100), Ledger(ledger_path, h100)
    grants = [(one if i % 2 else two).acquire({"GPU": 1}) for i in range(8)]
    assert sorted(g.ids["GPU"][0] for g in grants if g) == [str(i) for i in range(8)]
    assert one.acquire({"GPU": 1}) is None
    two.release(grants[0])  # a grant taken through the other object
    again = one.acquire({"GPU": 1})
    assert again is not None and again.ids == grants[0].ids


def test_unsatisfiable_at_once_even_when_waiting(ledger_path: Path, h100: Node) -> None:
    ledger = Ledger(ledger_path, h100)
    with pytest.raises(Unsatisfiable):
        ledger.acquire({"GPU": 9}, wait=True)
    with pytest.raises(Unsatisfiable):
        ledger.acquire({"TPU": 1}, wait=True, timeout=5)
    assert ledger.view().waiting == ()
    with pytest.raises(ValueError, match="wait=True"):
        ledger.acquire({"GPU": 1}, timeout=1)


def test_a_timed_out_wait_returns_none_and_leaves_the_queue(ledger_path: Path, h100: Node) -> None:
    ledger = Ledger(ledger_path, h100)
    assert ledger.acquire({"GPU": 8}) is not None
    assert ledger.acquire({"GPU": 1}, wait=True, timeout=0.05) is None
    assert ledger.view().waiting == ()


def test_fractions_pack_across_processes(
    ledger_path: Path, node_files: dict[str, Path], h100: Node
) -> None:
    node = node_files["nvidia-h100-8gpu"]
    holders = [HoldingProcess(ledger_path, node, {"GPU": q}) for q in (0.5, 0.25, 0.25, 0.5)]
    shares: dict[str, float] = {}
    for holder, share in zip(holders, (0.5, 0.25, 0.25, 0.5)):
        device = holder.ids()["GPU"][0]
        shares[device] = shares.get(device, 0) + share
    # Best fit: whatever the order of arrival, 1.5 GPUs of shares fill two devices, no more.
    assert sorted(shares) == ["0", "1"] and max(shares.values()) <= 1
    ledger = Ledger(ledger_path, h100)
    whole = ledger.acquire({"GPU": 6})
    assert whole is not None and whole.ids["GPU"] == ["2", "3", "4", "5", "6", "7"]
    for holder in holders:
        holder.finish()
    assert [g.ids for g in ledger.grants()] == [whole.ids]


def test_tpu_blocks_stay_aligned_across_processes(
    ledger_path: Path, node_files: dict[str, Path]
) -> None:
    requests = [{"TPU": n} for n in (1, 2, 4, 1)]
    holders, ids = hold_in_turn(ledger_path, node_files["tpu-v6e-8"], requests)
    # A pair is an aligned block: {2, 3}, never {1, 2}; the last chip fills the hole at 1.
    assert [i["TPU"] for i in ids] == [["0"], ["2", "3"], ["4", "5", "6", "7"], ["1"]]
    for holder in holders:
        holder.finish()


def test_neuron_ranges_stay_contiguous_across_processes(
    ledger_path: Path, node_files: dict[str, Path]
) -> None:
    node = node_files["neuron-trn1-32xlarge"]
    requests = [{"neuron_cores": n} for n in (2, 1, 8)]  # counts Trn1's collectives accept
    holders, ids = hold_in_turn(ledger_path, node, requests)
    eight = [str(n) for n in range(3, 11)]
    assert [i["neuron_cores"] for i in ids] == [["0", "1"], ["2"], eight]
    holders[1].finish()  # frees core 2: a gap too small for two cores
    pair, more = hold_in_turn(ledger_path, node, [{"neuron_cores": 2}])
    assert more == [{"neuron_cores": ["11", "12"]}]
    for holder in (holders[0], holders[2], *pair):
        holder.finish()


def test_dead_holders_are_reclaimed_before_every_decision(
    ledger_path: Path, node_files: dict[str, Path], h100: Node
) -> None:
    killed = HoldingProcess(ledger_path, node_files["nvidia-h100-8gpu"], {"GPU": 8})
    assert killed.ids() == {"GPU": [str(i) for i in range(8)]}
    ledger = Ledger(ledger_path, h100)
    assert ledger.acquire({"GPU": 1}) is None
    killed.kill()
    grant = ledger.acquire({"GPU": 1})
    assert grant is not None and ledger.grants() == [grant]


def test_a_reused_pid_does_not_keep_a_dead_grant(ledger_path: Path, h100: Node) -> None:
    ledger = Ledger(ledger_path, h100)
    grant = ledger.acquire({"GPU": 8})
    assert grant is not None
    me = Holder.current()
    # The same pid with another start time: a later process given a dead holder's pid.
    ledger.transfer(grant, Holder(me.pid, me.start + 1))
    assert ledger.grants() == []
    assert ledger.acquire({"GPU": 8}) is not None


MAIN_THREAD_ENDS = """
import ctypes, sys, threading, time
threading.Thread(target=sys.stdin.read).start()  # works on until the test closes its stdin
print("started", flush=True)
ctypes.CDLL(None).pthread_exit(None)
"""


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux's /proc")
def test_a_holder_whose_main_thread_ended_while_others_run_is_alive(
    ledger_path: Path, h100: Node
) -> None:
    """``/proc/<pid>/stat`` shows a process's first thread: once a program's main thread ends
    with ``pthread_exit`` it reads as a zombie while the program's other threads run on (and
    use its devices). Its grant stays until the last thread ends, and no longer."""
    argv = [sys.executable, "-c", MAIN_THREAD_ENDS]
    program = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert program.stdout is not None and program.stdout.readline() == "started\n"
    ledger = Ledger(ledger_path, h100)
    grant = ledger.acquire({"GPU": 8})
    assert grant is not None
    holder = Holder.of(program.pid)
    assert holder is not None
    ledger.transfer(grant, holder)
    deadline = time.monotonic() + 30
    while Path(f"/proc/{program.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
        assert time.monotonic() < deadline, "the main thread never ended"
        time.sleep(0.01)
    assert ledger.grants() == [grant] and holder.alive()
    assert ledger.acquire({"GPU": 1}) is None  # its devices are still in use
    assert program.stdin is not None
    program.stdin.close()  # the last thread ends: the process is a zombie until reaped
    while len(os.listdir(f"/proc/{program.pid}/task")) > 1:
        assert time.monotonic() < deadline, "the last thread never ended"
        time.sleep(0.01)
    assert not holder.alive() and ledger.grants() == []
    program.wait(timeout=30)


LOCK_AND_DIE = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.read()
"""


def test_a_writer_killed_mid_change_blocks_nothing_and_corrupts_nothing(
    ledger_path: Path, h100: Node
) -> None:
    ledger = Ledger(ledger_path, h100)
    grant = ledger.acquire({"GPU": 1})
    # A writer killed holding the lock, its new state half written to the temporary file.
    (ledger_path.parent / "ledger.json.tmp").write_text('{"version": 1, "gra')
    argv = [sys.executable, "-c", LOCK_AND_DIE, str(ledger_path) + ".lock"]
    writer = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert writer.stdout is not None and writer.stdout.readline() == "locked\n"
    writer.kill()
    writer.wait(timeout=30)
    assert ledger.grants() == [grant]  # the kernel dropped its lock; the ledger is whole
    assert ledger.acquire({"GPU": 1}) is not None


WRITE_UNDER_A_LIMIT = """
import json, resource, sys
from accelkit import LedgerError, Node
from accelkit.ledger._ledger import Ledger
path, node = sys.argv[1], Node.from_dict(json.loads(sys.argv[2]))
ledger = Ledger(path, node)
ledger.acquire({"GPU": 1})
size = len(open(path, "rb").read())
resource.setrlimit(resource.RLIMIT_FSIZE, (size + 50, resource.RLIM_INFINITY))
try:
    ledger.acquire({"GPU": 1})
except LedgerError as error:
    print(error)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")
def test_a_change_the_file_system_cannot_hold_leaves_the_ledger_as_it_was(
    ledger_path: Path, h100: Node
) -> None:
    """A write may take part of the new state (a file system nearly full, a quota, a file-size
    limit): the ledger must not be replaced by that part, which no process could read (every
    later decision on the node would fail until the file was removed, its grants with it).
    The change fails, saying why, and the ledger keeps the state before it."""
    argv = [sys.executable, "-c", WRITE_UNDER_A_LIMIT, str(ledger_path), json.dumps(h100.to_dict())]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "(File too large): the change was not made" in result.stdout
    state = json.loads(ledger_path.read_text())  # whole, with the first grant alone
    held = [[d["device"]["id"] for d in g["grant"]["devices"]] for g in state["grants"]]
    assert held == [["0"]]
    assert sorted(p.name for p in ledger_path.parent.iterdir()) == sorted(
        [ledger_path.name, ledger_path.name + ".lock"]
    )


def test_a_lock_file_removed_meanwhile_is_not_locked_alone(ledger_path: Path, h100: Node) -> None:
    """A lock file removed while a process keeps it open (``rm``, a temp-dir cleaner) left that
    process locking a file no other opened any more: both decided at once. The process finds
    the lock gone once it holds it, and takes the path's lock, waiting for whoever has it."""
    ledger = Ledger(ledger_path, h100)
    assert ledger.acquire({"GPU": 1}) is not None  # its lock file is open from now on
    lock = Path(str(ledger_path) + ".lock")
    lock.unlink()
    argv = [sys.executable, "-c", LOCK_AND_DIE, str(lock)]  # makes the lock again, and holds it
    locker = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert locker.stdout is not None and locker.stdout.readline() == "locked\n"
    done = threading.Event()
    deciding = threading.Thread(target=lambda: (ledger.acquire({"GPU": 1}), done.set()))
    deciding.start()
    assert not done.wait(0.5)  # waits for the lock the other process holds
    locker.kill()
    locker.wait(timeout=30)
    assert done.wait(30)
    deciding.join()
    assert [g.ids for g in ledger.grants()] == [{"GPU": ["0"]}, {"GPU": ["1"]}]


def test_a_reboot_reclaims_everything(ledger_path: Path, h100: Node) -> None:
    ledger = Ledger(ledger_path, h100)
    assert ledger.acquire({"GPU": 8}) is not None
    data = json.loads(ledger_path.read_text())
    data["boot"] = "another-boot"
    ledger_path.write_text(json.dumps(data))
    assert ledger.grants() == []


def test_a_ledger_another_machine_holds_grants_in_is_refused_not_wiped(
    ledger_path: Path, h100: Node
) -> None:
    """A ledger on a network file system, shared by two machines: each saw the other's records
    under another boot id, took them for a reboot's, and dropped them, so both handed out the
    same devices. Grants of devices this machine does not have (by UUID) are another machine's
    live grants: refused, saying what to do, and left in the file; ``holding`` (what ``accelkit
    env`` warns about) finds none of this node's devices in them."""
    ledger = Ledger(ledger_path, h100)
    assert ledger.acquire({"GPU": 8}) is not None
    data = json.loads(ledger_path.read_text())
    data["boot"] = "another-boot"
    for entry in data["grants"][0]["grant"]["devices"]:
        entry["device"]["uuid"] = entry["device"]["uuid"].replace("GPU-0", "GPU-f")
    ledger_path.write_text(json.dumps(data))
    other = Ledger(ledger_path, h100)
    for attempt in (lambda: other.acquire({"GPU": 1}), other.grants, other.view):
        with pytest.raises(
            LedgerError, match=r"holds grants of devices this machine does not have \(GPU-f"
        ):
            attempt()
    assert other.holding(h100.devices) == []
    assert json.loads(ledger_path.read_text()) == data  # nothing dropped
    data["grants"], data["queue"] = [], []  # the other machine's work has ended
    ledger_path.write_text(json.dumps(data))
    assert other.acquire({"GPU": 1}) is not None


def test_after_a_reboot_grants_of_this_machines_devices_are_dropped_whoever_wrote_them(
    ledger_path: Path, h100: Node
) -> None:
    """Containers of one machine share its boot id and its devices, each with a host name of
    its own: after a reboot the grants any of them recorded are the reboot's leftovers (a
    version 3 file too), and the next change writes version 4."""
    ledger = Ledger(ledger_path, h100)
    assert ledger.acquire({"GPU": 8}) is not None
    data = json.loads(ledger_path.read_text())
    data["version"], data["boot"] = 3, "another-boot"
    ledger_path.write_text(json.dumps(data))
    assert ledger.grants() == []
    assert json.loads(ledger_path.read_text())["version"] == 4


def test_waiters_are_served_in_arrival_order(
    ledger_path: Path, node_files: dict[str, Path], h100: Node
) -> None:
    ledger = Ledger(ledger_path, h100)
    everything = ledger.acquire({"GPU": 8})
    assert everything is not None
    node = node_files["nvidia-h100-8gpu"]
    big = HoldingProcess(ledger_path, node, {"GPU": 8}, wait=True)
    wait_until(lambda: len(ledger.view().waiting) == 1)
    small = HoldingProcess(ledger_path, node, {"GPU": 1}, wait=True)
    wait_until(lambda: len(ledger.view().waiting) == 2)
    assert [w.wants for w in ledger.view().waiting] == ["GPU=8", "GPU=1"]
    ledger.release(everything)  # both fit now: the first to arrive is served first
    assert big.ids() == {"GPU": [str(i) for i in range(8)]}
    big.finish()
    assert small.ids() == {"GPU": ["0"]}
    small.finish()


def test_a_stopped_waiter_holds_nobody_back_until_it_runs_again(
    ledger_path: Path, h100: Node
) -> None:
    """A waiter stopped by Ctrl-Z (SIGSTOP) took nothing, and every request that fitted waited
    behind it until it was resumed or killed. While it is stopped it keeps its place and holds
    nobody back."""
    ledger = Ledger(ledger_path, h100)
    seven = ledger.acquire({"GPU": 7})
    assert seven is not None
    sleeper = subprocess.Popen(["sleep", "600"])
    try:
        waiter = Holder.of(sleeper.pid)
        assert waiter is not None
        ticket = ledger._decide({"GPU": 8}, None, waiter, None, "GPU=8", True, None)[1]
        assert ticket is not None
        assert ledger.acquire({"GPU": 1}) is None  # GPU 7 is free, but the waiter is ahead
        os.kill(sleeper.pid, signal.SIGSTOP)
        wait_until(waiter.stopped)
        one = ledger.acquire({"GPU": 1})
        assert one is not None and one.ids == {"GPU": ["7"]}
        assert [w.ticket for w in ledger.view().waiting] == [ticket]  # it keeps its place
        ledger.release(one)
        os.kill(sleeper.pid, signal.SIGCONT)
        wait_until(lambda: not waiter.stopped())
        assert ledger.acquire({"GPU": 1}) is None
    finally:
        sleeper.kill()
        sleeper.wait(timeout=30)


def test_a_request_that_does_not_wait_never_overtakes_a_waiting_one(
    ledger_path: Path, h100: Node
) -> None:
    ledger = Ledger(ledger_path, h100)
    seven = ledger.acquire({"GPU": 7})
    assert seven is not None
    got = []
    waiter = threading.Thread(target=lambda: got.append(ledger.acquire({"GPU": 2}, wait=True)))
    waiter.start()
    wait_until(lambda: len(ledger.view().waiting) == 1)
    assert ledger.acquire({"GPU": 1}) is None  # GPU 7 is free, but a request waits ahead
    ledger.release(seven)
    waiter.join(timeout=30)
    assert got[0] is not None and got[0].ids == {"GPU": ["0", "1"]}
    assert ledger.acquire({"GPU": 1}) is not None


def test_a_waiter_that_dies_leaves_the_queue(
    ledger_path: Path, node_files: dict[str, Path], h100: Node
) -> None:
    ledger = Ledger(ledger_path, h100)
    assert ledger.acquire({"GPU": 8}) is not None
    waiter = HoldingProcess(ledger_path, node_files["nvidia-h100-8gpu"], {"GPU": 1}, wait=True)
    wait_until(lambda: len(ledger.view().waiting) == 1)
    waiter.kill()
    assert ledger.view().waiting == ()


@pytest.mark.parametrize("then", ["looks again", "never looks again"])
def test_a_waiter_whose_ledger_failed_leaves_no_ticket_behind(
    ledger_path: Path, h100: Node, then: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A waiter's look failed (a full disk), and taking its ticket out of the queue failed the
    same way: the ticket stayed while its process lived on, doing other work, and held back
    every request on the node. It is taken out once the ledger works again: at the ledger
    object's next look, or by the thread that tries again meanwhile."""
    holder, waiter = Ledger(ledger_path, h100), Ledger(ledger_path, h100)
    everything = holder.acquire({"GPU": 8})
    assert everything is not None
    full = threading.Event()
    write = waiter._file._write

    def written(state: LedgerState) -> None:
        if full.is_set():
            raise LedgerError("cannot write the ledger (No space left on device)")
        write(state)

    def fill_up(view: object) -> None:
        full.set()
        holder.release(everything)  # the waiter's grant is to be written at its next look

    monkeypatch.setattr(waiter._file, "_write", written)
    with pytest.raises(LedgerError, match="No space left on device"):
        waiter.acquire({"GPU": 8}, wait=True, on_wait=fill_up)
    assert [w.wants for w in holder.view().waiting] == ["GPU=8"]
    full.clear()  # room again
    if then == "looks again":
        assert waiter.grants() == []
    wait_until(lambda: holder.view().waiting == (), timeout=60)
    one = holder.acquire({"GPU": 1})
    assert one is not None and one.ids == {"GPU": ["0"]}


def test_a_ticket_given_up_on_is_taken_out_only_as_this_process_s(
    ledger_path: Path, h100: Node
) -> None:
    """The number of a ticket given up on may be given again by a ledger made anew (removed, as
    the corrupt-ledger advice says, while this process lived on): another process's waiting
    ticket of that number stays in the queue."""
    ledger = Ledger(ledger_path, h100)
    assert ledger.grants() == []
    other = Holder.of(os.getppid())
    assert other is not None
    with ledger._file.locked() as state:
        state.queue.append(Ticket(1, other, "GPU=8", time.time()))
        state.changed = True
    ledger._turns._abandoned.add(1)
    assert [w.wants for w in ledger.view().waiting] == ["GPU=8"]


def test_a_ledger_of_another_node_is_refused_while_it_holds_grants(
    ledger_path: Path, h100: Node, node_files: dict[str, Path]
) -> None:
    tpu = Node.from_dict(json.loads(node_files["tpu-v6e-8"].read_text()))
    grant = Ledger(ledger_path, h100).acquire({"GPU": 1})
    assert grant is not None
    with pytest.raises(LedgerError, match=r"another node \(GPU=8.*--ledger PATH"):
        Ledger(ledger_path, tpu).acquire({"TPU": 1})
    Ledger(ledger_path, h100).release(grant)
    # Empty, the ledger may serve the other node: nothing it records can be double-booked.
    assert Ledger(ledger_path, tpu).acquire({"TPU": 1}) is not None


@pytest.mark.parametrize(
    ("content", "complaint"),
    [
        ("{not json", "is corrupt"),
        ('{"version":4,"boot":"b","no', "is corrupt"),
        ("", "is corrupt"),
        ("\0" * 64, "is corrupt"),
        ('{"version": 1, "boot": "b"}', "is corrupt .*lacks the keys"),
        ('{"version": "1", "grants": []}', "is corrupt"),
    ],
)
def test_a_corrupt_ledger_is_a_clear_error_never_a_reset(
    ledger_path: Path, h100: Node, content: str, complaint: str
) -> None:
    ledger_path.write_text(content)
    with pytest.raises(LedgerError, match=complaint) as caught:
        Ledger(ledger_path, h100).acquire({"GPU": 1})
    assert str(ledger_path) in str(caught.value) and f"rm {ledger_path}" in str(caught.value)
    assert ledger_path.read_text() == content


@pytest.mark.parametrize(
    ("content", "what"),
    [
        ('{"name": "x", "version": "1.0.0"}', "a JSON object with none of its keys (boot, "),
        ('{"version": 1}', "a JSON object with none of its keys"),
        ("[1, 2]", "its JSON is an array, not an object"),
        ("null", "its JSON is null, not an object"),
        ("import os\n", "it is not JSON"),
    ],
)
def test_a_file_that_was_never_a_ledger_is_not_called_a_corrupt_one(
    ledger_path: Path, h100: Node, content: str, what: str
) -> None:
    """``--ledger package.json`` was told the ledger was corrupt (its ``version`` '1.0.0') and
    to remove it: a file without the ledger's keys is someone's own, named by mistake."""
    ledger_path.write_text(content)
    for use in (Ledger(ledger_path, h100).view, lambda: Ledger(ledger_path, h100).acquire({})):
        with pytest.raises(LedgerError) as caught:
            use()
        said = str(caught.value)
        assert said.startswith(f"{ledger_path} is not an accelkit ledger ({what}")
        assert "rm " not in said and "corrupt" not in said
    assert ledger_path.read_text() == content


def _mutated(data: dict[str, Any], change: str) -> str:
    """A ledger holding one live grant, changed as ``change`` says (its text)."""
    record = data["grants"][0]
    if change == "deep nesting":
        return "[" * 100_000 + "]" * 100_000
    if change == "holder pid 2**40":
        record["holder"]["pid"] = 2**40
    elif change == "boot is a number":
        data["boot"] = 5
    elif change == "version true":
        data["version"] = True
    elif change == "version 3.0":
        data["version"] = 3.0
    elif change == "grant recorded twice":
        data["grants"].append(json.loads(json.dumps(record)))
    elif change == "node without summary":
        data["node"] = {"fingerprint": data["node"]["fingerprint"]}
    elif change == "since NaN":
        record["since"] = float("nan")
    elif change == "parent no grant":
        record["parent"] = record["grant"]["token"] + 1000
    elif change == "parent itself":
        record["parent"] = record["grant"]["token"]
    return json.dumps(data)


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        ("deep nesting", "nested too deeply"),
        ("holder pid 2**40", r"a holder is .* 0 < N < 2147483648"),
        ("boot is a number", "its boot id is 5, not text"),
        ("version true", "version True, where this accelkit reads 4"),
        ("version 3.0", "version 3.0, where this accelkit reads 4"),
        ("grant recorded twice", r"grant token \d+ is recorded twice"),
        ("node without summary", "its node is"),
        ("since NaN", "a time is nan, not a finite number"),
        # counted under no grant, the step's devices were handed out again
        ("parent no grant", r"grant \d+ is a step of grant \d+, which the ledger does not hold"),
        ("parent itself", r"grant \d+ is a step of itself"),
    ],
)
def test_a_ledger_corrupted_around_a_live_grant_is_reported_never_reset(
    ledger_path: Path, h100: Node, change: str, complaint: str
) -> None:
    live = Ledger(ledger_path, h100).acquire({"GPU": 1})
    assert live is not None
    content = _mutated(json.loads(ledger_path.read_text()), change)
    ledger_path.write_text(content)
    with pytest.raises(LedgerError, match=complaint) as caught:
        Ledger(ledger_path, h100).acquire({"GPU": 8})
    assert f"the ledger {ledger_path} is corrupt" in str(caught.value)
    assert f"rm {ledger_path}" in str(caught.value)
    assert ledger_path.read_text() == content  # never reset


def test_grants_recorded_as_steps_of_each_other_make_the_ledger_corrupt(
    ledger_path: Path, h100: Node
) -> None:
    """Two grants each a step of the other are counted under neither, as a step of no grant is."""
    ledger = Ledger(ledger_path, h100)
    first, second = ledger.acquire({"GPU": 4}), ledger.acquire({"GPU": 4})
    assert first is not None and second is not None
    data = json.loads(ledger_path.read_text())
    data["grants"][0]["parent"] = second.token
    data["grants"][1]["parent"] = first.token
    ledger_path.write_text(json.dumps(data))
    with pytest.raises(LedgerError, match=r"is corrupt \(grant \d+ is a step of itself"):
        Ledger(ledger_path, h100).acquire({"GPU": 1})


def test_the_cli_names_a_too_deeply_nested_ledger(ledger_path: Path) -> None:
    ledger_path.write_text("[" * 100_000 + "]" * 100_000)
    shown = run(ledger_path, "ps")
    assert shown.returncode != 0 and "internal error" not in shown.stderr
    assert f"the ledger {ledger_path} is corrupt" in shown.stderr


def test_a_malformed_grant_record_is_reported_as_corrupt(ledger_path: Path, h100: Node) -> None:
    record = {"grant": {"token": 3, "devices": "?"}, "holder": {"pid": 1, "start": 0}, "since": 0}
    state = {"version": 1, "boot": boot_id(), "node": None, "next_ticket": 1, "queue": []}
    ledger_path.write_text(json.dumps({**state, "grants": [record]}))
    with pytest.raises(LedgerError, match=r"is corrupt .*grant"):
        Ledger(ledger_path, h100).grants()


def test_what_a_member_may_put_at_the_ledger_s_path_stalls_and_fills_no_reader(
    ledger_path: Path, h100: Node
) -> None:
    """Whoever may write a group's directory may put a FIFO at the ledger's path (every reader
    blocked in open, holding the lock), a huge sparse file (read whole into memory) or a link to
    another file: each is refused at once, naming the file, and nothing is reset."""
    ledger = Ledger(ledger_path, h100)
    os.mkfifo(ledger_path)
    started = time.monotonic()
    with pytest.raises(LedgerError, match=r"is corrupt \(it is not a regular file"):
        ledger.acquire({"GPU": 1})
    with pytest.raises(LedgerError, match="is corrupt"):
        ledger.view()
    assert time.monotonic() - started < 5
    ledger_path.unlink()
    with ledger_path.open("wb") as huge:
        huge.truncate(17 * 2**20)  # sparse: costs its maker nothing
    with pytest.raises(LedgerError, match=r"larger than any ledger"):
        ledger.grants()
    ledger_path.unlink()
    (ledger_path.parent / "elsewhere.json").write_text("{}")
    ledger_path.symlink_to(ledger_path.parent / "elsewhere.json")
    with pytest.raises(LedgerError, match=r"the ledger .* is a symbolic link"):
        ledger.grants()
    assert (ledger_path.parent / "elsewhere.json").read_text() == "{}"


def test_a_directory_where_changes_are_written_is_named_with_what_to_do(
    ledger_path: Path, h100: Node
) -> None:
    """A member of a group's directory may make a directory where each change is first written
    (``<ledger>.tmp``): every decision fails until it goes, so the error names it (it said to fix
    the permissions of the ledger's directory, which were right) and nothing is reset."""
    ledger = Ledger(ledger_path, h100)
    assert ledger.acquire({"GPU": 1}) is not None
    before = ledger_path.read_text()
    in_the_way = Path(f"{ledger_path}.tmp")
    in_the_way.mkdir()
    with pytest.raises(LedgerError, match=rf"a directory is in the way .*rm -r {in_the_way}\)"):
        ledger.acquire({"GPU": 1})
    assert ledger_path.read_text() == before
    in_the_way.rmdir()
    assert ledger.acquire({"GPU": 1}) is not None


@pytest.mark.parametrize(
    ("directory_mode", "lock_mode", "ledger_mode"),
    [(0o700, 0o600, 0o600), (0o2775, 0o660, 0o664), (0o2750, 0o600, 0o640), (0o777, 0o666, 0o666)],
)
def test_only_those_who_may_change_the_ledger_may_open_its_lock(
    tmp_path: Path, h100: Node, directory_mode: int, lock_mode: int, ledger_mode: int
) -> None:
    """Any process that can open the lock can lock it, read-only too, and hold up every
    decision on the node: the lock is open to those the directory lets write, while the ledger
    stays readable by those who may list it (``accelkit ps``)."""
    directory = tmp_path / "shared"
    directory.mkdir()
    directory.chmod(directory_mode)
    ledger = Ledger(directory / "ledger.json", h100)
    assert ledger.acquire({"GPU": 1}) is not None
    assert stat.S_IMODE((directory / "ledger.json.lock").stat().st_mode) == lock_mode
    assert stat.S_IMODE((directory / "ledger.json").stat().st_mode) == ledger_mode


def test_a_lock_held_for_long_is_an_error_naming_it_not_a_hang(
    ledger_path: Path, h100: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A decision holds the lock for milliseconds; a process that keeps it (stopped, stuck, or
    holding it on purpose) stalled every process of the node, whatever their timeouts."""
    monkeypatch.setattr(ledger_file, "_LOCK_PATIENCE", 0.3)
    lock = Path(str(ledger_path) + ".lock")
    argv = [sys.executable, "-c", LOCK_AND_DIE, str(lock)]
    locker = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert locker.stdout is not None and locker.stdout.readline() == "locked\n"
        with pytest.raises(LedgerError, match=rf"lock {lock} has been held for 0.3 s"):
            Ledger(ledger_path, h100).acquire({"GPU": 1})
    finally:
        locker.kill()
        locker.wait(timeout=30)
    assert Ledger(ledger_path, h100).acquire({"GPU": 1}) is not None


def test_a_per_user_directory_another_user_made_is_never_read(
    tmp_path: Path, h100: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no ``XDG_RUNTIME_DIR`` the per-user ledger is in ``<temp>/accelkit-<uid>``, which
    another user may make first, with a ledger of their choosing in it (a FIFO hung ``ps`` and
    ``env``, which read it before the owner was checked). Every use refuses it, saying what to
    do; the user's own directory left open to others is made private again."""
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.delenv("ACCELKIT_LEDGER", raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    me, someone = os.getuid(), os.getuid() + 1
    squatted = tmp_path / f"accelkit-{someone}"  # made by this test's user, not "someone"
    squatted.mkdir()
    squatted.chmod(0o777)
    os.mkfifo(squatted / "ledger.json")
    monkeypatch.setattr(os, "getuid", lambda: someone)
    ledger = Ledger(None, h100)
    for use in (ledger.view, ledger.grants, lambda: ledger.acquire({"GPU": 1})):
        with pytest.raises(LedgerError, match=r"is not a directory of this user .*ACCELKIT_LEDGER"):
            use()
    monkeypatch.setattr(os, "getuid", lambda: me)
    own = tmp_path / f"accelkit-{me}"
    own.mkdir()
    own.chmod(0o777)
    assert Ledger(None, h100).grants() == []
    assert stat.S_IMODE(own.stat().st_mode) == 0o700


def test_a_ledger_from_a_newer_accelkit_is_refused(ledger_path: Path, h100: Node) -> None:
    ledger_path.write_text(json.dumps({"version": 5, "grants": "whatever"}))
    with pytest.raises(LedgerError, match="version 5, written by a newer accelkit") as caught:
        Ledger(ledger_path, h100).grants()
    assert str(ledger_path) in str(caught.value)


def test_a_grant_the_node_cannot_hold_is_reported(ledger_path: Path, h100: Node) -> None:
    ledger = Ledger(ledger_path, h100)
    assert ledger.acquire({"GPU": 1}) is not None
    data = json.loads(ledger_path.read_text())
    data["grants"].append(dict(data["grants"][0]))
    data["grants"][1]["grant"] = dict(data["grants"][1]["grant"], token=1)
    ledger_path.write_text(json.dumps(data))  # two grants of one whole GPU
    with pytest.raises(LedgerError, match="records grants this node cannot hold"):
        Ledger(ledger_path, h100).acquire({"GPU": 1})


READ_ONLY_CHECK = """
import json, sys
from accelkit import LedgerError, Node
from accelkit.ledger._ledger import Ledger
node = Node.from_dict(json.load(open(sys.argv[2])))
try:
    Ledger(sys.argv[1], node).acquire({"GPU": 1})
except LedgerError as error:
    print(error)
"""


def test_a_read_only_ledger_directory_is_a_clear_error(
    tmp_path: Path, node_files: dict[str, Path]
) -> None:
    folder = tmp_path / "shared"
    folder.mkdir()
    path = folder / "ledger.json"
    argv = [sys.executable, "-c", READ_ONLY_CHECK, str(path), str(node_files["nvidia-h100-8gpu"])]
    if os.geteuid() == 0:
        # root writes through permission bits: make the directory read-only with a mount.
        script = 'mount --bind -o ro "$1" "$1" && shift && exec "$@"'
        argv = ["unshare", "-m", "sh", "-c", script, "sh", str(folder), *argv]
        try:
            result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        except FileNotFoundError:
            pytest.skip("unshare is needed to make a read-only directory as root")
        if "mount" in result.stderr:
            pytest.skip(f"cannot mount read-only here: {result.stderr.strip()}")
    else:
        folder.chmod(0o555)
        result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    message = result.stdout
    assert f"cannot write the ledger {path}" in message, result
    assert f"permission on {folder}" in message and "--ledger PATH" in message


def test_the_default_ledger_is_per_user_unless_a_group_names_one(
    tmp_path: Path, h100: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    ledger = Ledger(node=h100)
    assert ledger.path == tmp_path / "accelkit" / "ledger.json"
    assert ledger.acquire({"GPU": 1}) is not None
    assert (tmp_path / "accelkit").stat().st_mode & 0o777 == 0o700
    assert oct(ledger.path.stat().st_mode & 0o777) == oct(0o600)
    group = tmp_path / "group"
    group.mkdir(mode=0o770)
    group.chmod(0o2770)
    monkeypatch.setenv("ACCELKIT_LEDGER", str(group / "ledger.json"))
    shared = Ledger(node=h100)
    assert shared.path == group / "ledger.json" and shared.acquire({"GPU": 1}) is not None
    # The group's ledger and its lock take the directory's read and write bits.
    assert oct(shared.path.stat().st_mode & 0o777) == oct(0o660)
    assert oct((group / "ledger.json.lock").stat().st_mode & 0o777) == oct(0o660)


def test_a_lock_that_is_a_symbolic_link_is_refused_and_its_target_left_alone(
    tmp_path: Path, h100: Node
) -> None:
    """Anyone who may write a group's ledger directory could aim the lock at a file of the next
    user of accelkit: opened through the link, that file would be created, or given the
    directory's mode (0660: readable by the whole group)."""
    group = tmp_path / "group"
    group.mkdir()
    group.chmod(0o2770)
    secret, missing = tmp_path / "secret", tmp_path / "created"
    secret.write_text("a key")
    secret.chmod(0o600)
    lock = group / "ledger.json.lock"
    for target in (secret, missing):
        lock.unlink(missing_ok=True)
        lock.symlink_to(target)
        with pytest.raises(LedgerError, match=r"lock .* is a symbolic link.*remove it \(rm "):
            Ledger(group / "ledger.json", h100).acquire({"GPU": 1})
    assert oct(secret.stat().st_mode & 0o777) == oct(0o600) and secret.read_text() == "a key"
    assert not missing.exists() and not (group / "ledger.json").exists()
    lock.unlink()
    assert Ledger(group / "ledger.json", h100).acquire({"GPU": 1}) is not None


def test_a_missing_directory_of_a_given_path_is_explained(tmp_path: Path, h100: Node) -> None:
    path = tmp_path / "nowhere" / "ledger.json"
    with pytest.raises(LedgerError, match=r"does not exist\. Create it"):
        Ledger(path, h100).acquire({"GPU": 1})


def wait_until(condition: object, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_the_ledger_file_matches_its_documented_schema(
    ledger_path: Path, node_files: dict[str, Path], h100: Node
) -> None:
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is in the test extra")
    schemas = Path(__file__).resolve().parents[2] / "docs" / "schemas"
    ledger = Ledger(ledger_path, h100)
    held = ledger.acquire({"GPU": 7})
    waiter = HoldingProcess(ledger_path, node_files["nvidia-h100-8gpu"], {"GPU": 2}, wait=True)
    wait_until(lambda: len(ledger.view().waiting) == 1)
    data = json.loads(ledger_path.read_text())
    waiter.kill()
    for name, document in (("ledger", data), ("grant", data["grants"][0]["grant"])):
        schema = json.loads((schemas / f"{name}.schema.json").read_text())
        jsonschema.Draft202012Validator(schema).validate(document)
    assert held is not None and data["queue"][0]["wants"] == "GPU=2"


@pytest.mark.parametrize("variable", ["TMPDIR", "TEMP", "TMP", None])
def test_the_default_ledger_lives_where_tempfile_would_put_it(
    variable: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``temp_directory`` stands in for ``tempfile.gettempdir()`` (kept off ``accelkit run``'s
    start-up): both must name one directory, or two accelkit versions would keep two ledgers."""
    import tempfile

    from accelkit.ledger._location import default_path, temp_directory

    for name in ("TMPDIR", "TEMP", "TMP", "XDG_RUNTIME_DIR", "ACCELKIT_LEDGER", "ACCELKIT_GRANT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path / "missing"))  # skipped by both: no such directory
    if variable is not None:
        monkeypatch.setenv(variable, str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # tempfile's own cache of its answer
    assert temp_directory() == tempfile.gettempdir()
    expected = Path(tempfile.gettempdir()) / f"accelkit-{os.getuid()}" / "ledger.json"
    assert default_path() == (expected, True)
