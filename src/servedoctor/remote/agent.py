"""servedoctor's agent on the remote host: stdlib only, sent as ``python3 -c`` over SSH.

Two modes (``sys.argv[1]``):

``run RUN_ID GRACE -- ARGV...``
    Reads one JSON line from stdin (``{"env": {...}}``: the server's extra environment,
    sent this way so that no value ever appears on a command line), then starts ARGV in a
    new session (its own process group) with its stdout and stderr on the agent's stdout
    (the SSH channel that servedoctor copies into the run's raw log as it arrives). Every
    process of the run carries ``SERVEDOCTOR_RUN_ID=RUN_ID`` in its environment.
    Then it waits on stdin: the line ``stop`` (or ``kill``: no grace) or the end of stdin
    (servedoctor died, or the connection dropped) stops the whole tree: SIGTERM to the group
    and to every process with the marker, GRACE seconds, then SIGKILL, and counts what is
    left. The agent ignores SIGHUP and SIGPIPE, so a dropped connection cannot kill it before
    it has stopped the server.

``reap RUN_ID WAIT``
    After a dropped connection: waits up to WAIT seconds for the run's processes (by the
    marker) to end, SIGKILLs any left, and reports.

Control lines go to stderr, each ``@servedoctor WORD key=value ...``: ``started pid=N``,
``exit code=N`` (Popen style: -N for a signal), ``stopped leftover=N killed=N pids=P,Q``,
``reaped leftover=N killed=N pids=...``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time

MARKER = "SERVEDOCTOR_RUN_ID"
TAG = "@servedoctor"
_KILL_WAIT_S = 5.0


def say(text: str) -> None:
    with contextlib.suppress(OSError):  # the connection is gone: the teardown goes on
        os.write(2, f"{TAG} {text}\n".encode())


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, process group) of a pid, from /proc/PID/stat."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        rest = stat[stat.rindex(b")") + 2 :].split()
        return rest[0].decode(), int(rest[2])
    except (OSError, ValueError, IndexError):
        return None


def _marked(pid: int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return needle in f.read().split(b"\0")
    except OSError:
        return False


def run_pids(run_id: str, pgid: int | None) -> set[int]:
    """Live (not zombie) pids of the run: its process group and every carrier of the marker."""
    needle = (MARKER + "=" + run_id).encode()
    me = os.getpid()
    found = set()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        pid = int(name)
        stat = _stat(pid)
        if stat is None or stat[0] == "Z":
            continue
        if (pgid is not None and stat[1] == pgid) or _marked(pid, needle):
            found.add(pid)
    return found


def _signal(pids: set[int], pgid: int | None, sig: int) -> None:
    if pgid is not None:
        with contextlib.suppress(OSError):
            os.killpg(pgid, sig)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, sig)


def _wait_gone(
    run_id: str, pgid: int | None, timeout: float, child: subprocess.Popen[bytes] | None
) -> set[int]:
    deadline = time.monotonic() + timeout
    while True:
        if child is not None:
            child.poll()  # reap our own child, or it lingers as a zombie
        left = run_pids(run_id, pgid)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.05)


def stop_tree(
    run_id: str, pgid: int | None, grace: float, child: subprocess.Popen[bytes] | None
) -> tuple[set[int], int]:
    """SIGTERM, ``grace`` seconds, SIGKILL; (pids still alive, how many needed SIGKILL)."""
    procs = run_pids(run_id, pgid)
    killed = 0
    if procs:
        _signal(procs, pgid, signal.SIGTERM)
        procs = _wait_gone(run_id, pgid, grace, child)
    if procs:
        killed = len(procs)
        _signal(procs, pgid, signal.SIGKILL)
        procs = _wait_gone(run_id, pgid, _KILL_WAIT_S, child)
    return procs, killed


def _report(word: str, left: set[int], killed: int) -> None:
    pids = ",".join(str(p) for p in sorted(left)) or "-"
    say(f"{word} leftover={len(left)} killed={killed} pids={pids}")


def run(run_id: str, grace: float, argv: list[str]) -> int:
    for sig in (signal.SIGHUP, signal.SIGPIPE, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)
    stdin = sys.stdin.buffer
    try:
        header = json.loads(stdin.readline() or b"{}")
    except ValueError:
        header = {}
    env = dict(os.environ)
    env.update({str(k): str(v) for k, v in (header.get("env") or {}).items()})
    env[MARKER] = run_id
    stop = threading.Event()
    words: list[str] = []

    def listen() -> None:
        for line in stdin:
            word = line.decode(errors="replace").strip()
            if word in ("stop", "kill"):
                words.append(word)
                break
        stop.set()  # a word, or the end of stdin: the connection or servedoctor is gone

    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        child: subprocess.Popen[bytes] | None = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=1, stderr=1, env=env, start_new_session=True
        )
    except OSError as exc:
        msg = f"servedoctor: cannot start {argv[0] if argv else '?'}: {exc.strerror}\n"
        with contextlib.suppress(OSError):
            os.write(1, msg.encode())
        child = None
    threading.Thread(target=listen, daemon=True).start()
    pgid = None if child is None else child.pid
    if child is None:
        say("exit code=127")
    else:
        say(f"started pid={child.pid}")
    reported = child is None
    while not stop.wait(0.1):
        if not reported and child is not None and child.poll() is not None:
            say(f"exit code={child.returncode}")
            reported = True
    left, killed = stop_tree(run_id, pgid, 0.0 if words == ["kill"] else grace, child)
    if not reported and child is not None and child.poll() is not None:
        say(f"exit code={child.returncode}")
    _report("stopped", left, killed)
    return 0


def reap(run_id: str, wait: float) -> int:
    left = _wait_gone(run_id, None, wait, None)
    killed = 0
    if left:
        killed = len(left)
        _signal(left, None, signal.SIGKILL)
        left = _wait_gone(run_id, None, _KILL_WAIT_S, None)
    _report("reaped", left, killed)
    return 0


def main(args: list[str]) -> int:
    if len(args) >= 4 and args[0] == "run" and args[3] == "--":
        return run(args[1], float(args[2]), args[4:])
    if len(args) == 3 and args[0] == "reap":
        return reap(args[1], float(args[2]))
    say("usage run RUN_ID GRACE -- ARGV... | reap RUN_ID WAIT")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
