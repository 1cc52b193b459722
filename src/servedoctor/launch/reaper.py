"""The reaper: stops a run's server when its supervisor dies, whatever killed it.

``python -I reaper.py FD RUN_DIR RUN_ID GRACE_S SUPERVISOR_PID`` is started just before the
server, in a session of its own, holding the read end (FD) of a pipe whose write end only the
supervisor holds. The supervisor writes one line per fact:

* ``track PID CREATE_TIME``: a process of the server (the leader first, then descendants);
* ``done``: the supervisor stopped the server itself; ``keep``: the server stays up
  (``--keep-running``). Either way the reaper leaves without touching anything.

End of file without ``done`` or ``keep`` means the supervisor is gone — SIGKILL, a crash, the
OOM killer. (``PR_SET_PDEATHSIG`` on Linux says the same, should the write end ever leak
into another process.) The reaper then sends SIGTERM to the server's process group and to
every process of the run it can find (tracked pids, the run marker in the environment,
their descendants), waits GRACE_S, SIGKILLs what is left, and writes into run.json the
outcome ``orphaned`` with what it stopped.

Standard library only at import, and run as a file, not a module, so that it starts in an
interpreter's time without loading servedoctor; psutil is imported only for a teardown.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import signal
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

RUN_MARKER = "SERVEDOCTOR_RUN_ID"  # as in process.py: the environment marker of the run
ORPHANED = "orphaned: supervisor gone"
_PR_SET_PDEATHSIG = 1
_POLL_S = 0.02
_PARENT_CHECK_S = 0.5  # how often the reaper looks whether its parent is still there
#: Create times of one process may differ this much between readings (the kernel's boot
#: time, psutil's base, can move by a second); a pid reused this fast is not a worry.
_SAME_S = 1.5


def _watch_parent(wake_w: int) -> None:
    """Linux: SIGUSR1 when the supervisor dies (even if the pipe's write end leaked). The
    handler does nothing; the signal only wakes ``listen`` through the wakeup fd, so no
    exception can come from it at a point that is not ready for one."""
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGUSR1, lambda signum, frame: None)
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGUSR1), 0, 0, 0)


def listen(fd: int, supervisor_pid: int, known: dict[int, float]) -> str:
    """Read the supervisor's lines until ``done``, ``keep`` or ``gone`` (EOF or its death)."""
    buf = [b""]

    def take(data: bytes) -> str | None:
        *lines, buf[0] = (buf[0] + data).split(b"\n")
        for line in lines:
            word, *args = line.decode().split() or [""]
            if word in ("done", "keep"):
                return word
            if word == "track" and len(args) == 2:
                known[int(args[0])] = float(args[1])
        return None

    wake_r, wake_w = os.pipe()
    for end in (wake_r, wake_w):
        os.set_blocking(end, False)
    _watch_parent(wake_w)
    os.set_blocking(fd, False)
    while True:
        parent_alive = os.getppid() == supervisor_pid
        ready, _, _ = select.select([fd, wake_r], [], [], _PARENT_CHECK_S)
        if wake_r in ready:
            with contextlib.suppress(OSError):
                os.read(wake_r, 512)
        if fd in ready or not parent_alive:
            while True:  # everything it wrote before it closed the pipe or died
                try:
                    data = os.read(fd, 4096)
                except BlockingIOError:
                    break
                if not data:
                    return "gone"  # end of file: no 'done' or 'keep' came
                if said := take(data):
                    return said
        if not parent_alive:
            return "gone"


def _find(run_id: str, known: dict[int, float], pgids: set[int]) -> list[Any]:
    """The run's live processes: tracked, in its group, or carrying its marker; and children."""
    import psutil

    me = os.getpid()
    found: dict[int, psutil.Process] = {}
    for pid, created in known.items():
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(pid)
            if abs(proc.create_time() - created) < _SAME_S:  # the same process, not a reused pid
                found[pid] = proc
    for proc in psutil.process_iter():
        if proc.pid == me or proc.pid in found:
            continue
        with contextlib.suppress(psutil.Error, OSError):
            if os.getpgid(proc.pid) in pgids or proc.environ().get(RUN_MARKER) == run_id:
                found[proc.pid] = proc
    for proc in list(found.values()):
        with contextlib.suppress(psutil.Error):
            for child in proc.children(recursive=True):
                found.setdefault(child.pid, child)
    return [p for p in found.values() if _alive(p)]


def _alive(proc: Any) -> bool:
    import psutil

    try:  # not is_running(): it compares create times exactly
        return bool(proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def _signal(procs: list[Any], pgids: set[int], sig: signal.Signals) -> None:
    for pgid in pgids:
        with contextlib.suppress(OSError):
            os.killpg(pgid, sig)
    for proc in procs:
        with contextlib.suppress(Exception):
            proc.send_signal(sig)


def _wait(procs: list[Any], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(_alive(p) for p in procs):
        time.sleep(_POLL_S)


def stop_tree(run_id: str, known: dict[int, float], grace_s: float) -> dict[str, Any]:
    """SIGTERM the run's processes, wait ``grace_s``, SIGKILL the rest; what it took."""
    started = time.monotonic()
    pgids = set(list(known)[:1])  # the first pid tracked is the server, leader of its group
    procs = _find(run_id, known, pgids)
    pgids |= {p.pid for p in procs if _leads_group(p.pid)}
    stopped = sorted(p.pid for p in procs)
    _signal(procs, pgids, signal.SIGTERM)
    _wait(procs, grace_s)
    survivors = _find(run_id, known, pgids)
    if survivors:
        _signal(survivors, pgids, signal.SIGKILL)
        _wait(survivors, 5.0)
    left = _find(run_id, known, pgids)
    return {
        "by": "reaper",
        "tracked_pids": sorted(known),
        "stopped_pids": stopped,
        "killed": len(survivors),
        "leftover": len(left),
        "leftover_pids": sorted(p.pid for p in left),
        "duration_s": round(time.monotonic() - started, 3),
        "exit_code": None,
    }


def _leads_group(pid: int) -> bool:
    try:
        return os.getpgid(pid) == pid
    except OSError:
        return False


def record_orphan(run_dir: Path, teardown: dict[str, Any]) -> None:
    """Write the outcome into run.json (a final outcome already there is kept)."""
    path = run_dir / "run.json"
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        record = {"run_dir": str(run_dir)}
    if record.get("outcome") in (None, "running"):
        record["outcome"] = "orphaned"
        record["outcome_detail"] = ORPHANED
        record["ended_at"] = datetime.now().astimezone().isoformat(timespec="seconds")
        record["teardown"] = teardown
    elif teardown["stopped_pids"]:
        record["reaper"] = teardown  # the supervisor ended the run but left processes
    else:
        return
    tmp = path.with_suffix(".json.reaper")
    tmp.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def main(args: list[str]) -> int:
    fd, run_dir, run_id, grace_s, supervisor_pid = args
    known: dict[int, float] = {}
    if listen(int(fd), int(supervisor_pid), known) != "gone":
        return 0
    teardown = stop_tree(run_id, known, float(grace_s))
    record_orphan(Path(run_dir), teardown)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
