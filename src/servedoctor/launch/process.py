"""Start a server command in its own session and stop its whole process tree.

The command runs as an argv list (never through a shell) with ``start_new_session=True``, so
it leads its own process group. Teardown sends SIGTERM to the group, waits a grace period,
then SIGKILLs the group and every descendant that left it (found through a marker in the
environment, through parent links, and through snapshots taken while the server ran), and
counts what is still alive.

A reaper process (``reaper.py``) is started with the server and tied to the supervisor by a
pipe: if the supervisor dies without saying it is done, the reaper stops the tree instead.

:func:`start_server` is the one entry point: with a remote target it starts the command on
another host through SSH instead (``servedoctor.remote``), behind the same :class:`Server`
interface.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import psutil

from servedoctor.errors import UserError

if TYPE_CHECKING:
    from servedoctor.remote.launching import RemoteLaunch

#: Environment variable set for the server; every descendant inherits it unless it clears it.
RUN_MARKER = "SERVEDOCTOR_RUN_ID"

_Key = tuple[int, float]  # (pid, create_time): a pid alone may be reused
REAPER = Path(__file__).with_name("reaper.py")


def check_command(argv: Sequence[str]) -> None:
    """A usage error (exit 2) for an empty command or one that does not exist."""
    if not argv:
        raise UserError("no server command given: servedoctor launch [OPTIONS] -- CMD ...")
    exe = argv[0]
    if os.sep in exe:
        if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
            raise UserError(f"command not found or not executable: {exe}")
    elif shutil.which(exe) is None:
        raise UserError(f"command not found: {exe}")


@dataclass(frozen=True)
class Teardown:
    """What stopping the tree took."""

    leftover: int
    leftover_pids: tuple[int, ...]
    killed: int  # processes that needed SIGKILL
    duration_s: float
    exit_code: int | None
    confirmed: bool = True  # False: a remote host could not be asked what was left

    def to_dict(self) -> dict[str, object]:
        data: dict[str, object] = {
            "leftover": self.leftover,
            "leftover_pids": list(self.leftover_pids),
            "killed": self.killed,
            "duration_s": round(self.duration_s, 3),
            "exit_code": self.exit_code,
        }
        if not self.confirmed:
            data["confirmed"] = False
        return data


class Server(Protocol):
    """What the supervisor needs of a started server, here or on a remote host."""

    run_id: str
    pid: int
    pgid: int
    reaper: Reaper | None
    notes: list[str]  # what the run's warnings should say about the process's transport

    def poll(self) -> int | None: ...

    @property
    def returncode(self) -> int | None: ...

    def snapshot(self) -> int: ...

    def pids(self) -> set[int]: ...

    def release(self, *, keep: bool) -> None: ...

    def stop(
        self,
        *,
        grace_s: float = 10.0,
        kill_wait_s: float = 5.0,
        hurry: Callable[[], bool] | None = None,
    ) -> Teardown: ...


def start_server(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None,
    run_dir: Path,
    grace_s: float,
    output_fd: int,
    remote: RemoteLaunch | None = None,
) -> Server:
    """Start ``argv`` here (:class:`ServerProcess`) or, with ``remote``, on a remote host
    through SSH (:class:`servedoctor.remote.process.RemoteServerProcess`)."""
    if remote is None:
        return ServerProcess(argv, env=env, run_dir=run_dir, grace_s=grace_s, output_fd=output_fd)
    from servedoctor.remote.process import RemoteServerProcess

    return RemoteServerProcess(
        argv,
        target=remote.target,
        env=env,
        grace_s=grace_s,
        output_fd=output_fd,
        forward=remote.forward,
    )


class Reaper:
    """The supervisor's end of the reaper (see ``reaper.py``): the pipe only we can write."""

    def __init__(self, run_dir: Path, run_id: str, grace_s: float) -> None:
        read_end, self._write_end = os.pipe()  # both close-on-exec: no other child gets them
        try:
            args = [str(read_end), str(run_dir), run_id, repr(float(grace_s)), str(os.getpid())]
            self.popen = subprocess.Popen(
                [sys.executable, "-I", str(REAPER), *args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(read_end,),
                start_new_session=True,
            )
        except BaseException:
            os.close(self._write_end)
            raise
        finally:
            os.close(read_end)
        self.pid = self.popen.pid

    def send(self, line: str) -> None:
        if self._write_end < 0:
            return
        with contextlib.suppress(OSError):  # the reaper is gone: nothing to tell
            os.write(self._write_end, line.encode() + b"\n")

    def release(self, word: str) -> None:
        """``done`` (we stopped the server) or ``keep`` (leave it up); the reaper leaves."""
        self.send(word)
        if self._write_end >= 0:
            os.close(self._write_end)
            self._write_end = -1
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=2.0)


class ServerProcess:
    """One server command, started in a new session with stdout and stderr on one pipe, or
    on ``output_fd`` (the run's raw log file: then nothing of ours can slow its writes).

    With ``run_dir``, a :class:`Reaper` is started first, so no instant exists at which the
    server runs untied to this process.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        run_dir: Path | None = None,
        grace_s: float = 10.0,
        output_fd: int | None = None,
    ) -> None:
        self.run_id = uuid.uuid4().hex
        self.notes: list[str] = []
        full_env = dict(os.environ)
        full_env.update(env or {})
        full_env[RUN_MARKER] = self.run_id
        self.reaper = None if run_dir is None else Reaper(run_dir, self.run_id, grace_s)
        try:
            self.popen = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE if output_fd is None else output_fd,
                stderr=subprocess.STDOUT,
                env=full_env,
                start_new_session=True,
            )
        except BaseException:
            self.release(keep=False)
            raise
        self.pid = self.popen.pid
        self.pgid = self.pid  # leader of its own group
        self._known: dict[_Key, psutil.Process] = {}
        self._remember(self.pid)

    def release(self, *, keep: bool) -> None:
        """Tell the reaper the run ended (``keep``: the server stays up); it leaves."""
        if self.reaper is not None:
            self.reaper.release("keep" if keep else "done")

    @property
    def stdout_fd(self) -> int:
        assert self.popen.stdout is not None
        return self.popen.stdout.fileno()

    def poll(self) -> int | None:
        return self.popen.poll()

    @property
    def returncode(self) -> int | None:
        return self.popen.returncode

    def _remember(self, pid: int) -> None:
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(pid)
            self._add((pid, proc.create_time()), proc)

    def _add(self, key: _Key, proc: psutil.Process) -> None:
        if key not in self._known:
            self._known[key] = proc
            if self.reaper is not None:
                self.reaper.send(f"track {key[0]} {key[1]!r}")

    def snapshot(self) -> int:
        """Remember the current descendants (they may leave the group or be reparented)."""
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(self.pid).children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    self._add((child.pid, child.create_time()), child)
        return len(self._known)

    def pids(self) -> set[int]:
        """Pids of the run's processes alive now, from parent links and snapshots (cheap)."""
        self.snapshot()
        return {p.pid for p in self._alive(list(self._known.values()))}

    def _tree(self) -> list[psutil.Process]:
        """Every process of the run we can find: group, marker, parent links, snapshots."""
        self.snapshot()
        found: dict[_Key, psutil.Process] = dict(self._known)
        for proc in psutil.process_iter():
            try:
                if proc.pid == os.getpid():
                    continue
                in_group = os.getpgid(proc.pid) == self.pgid
                if in_group or proc.environ().get(RUN_MARKER) == self.run_id:
                    found.setdefault((proc.pid, proc.create_time()), proc)
            except (psutil.Error, ProcessLookupError, PermissionError, OSError):
                continue
        return list(found.values())

    @staticmethod
    def _alive(procs: list[psutil.Process]) -> list[psutil.Process]:
        alive = []
        for proc in procs:
            try:
                if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                    alive.append(proc)
            except psutil.Error:
                continue
        return alive

    def _signal_all(self, procs: list[psutil.Process], sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, sig)
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                proc.send_signal(sig)

    def stop(
        self,
        *,
        grace_s: float = 10.0,
        kill_wait_s: float = 5.0,
        hurry: Callable[[], bool] | None = None,
    ) -> Teardown:
        """SIGTERM the tree, wait ``grace_s``, SIGKILL what is left, count survivors.

        A KeyboardInterrupt during the grace period, or ``hurry()`` turning true (a second
        Ctrl-C seen by a caller that holds signals), cuts it short.
        """
        started = time.monotonic()
        killed = 0
        try:
            procs = self._alive(self._tree())
            if procs:
                self._signal_all(procs, signal.SIGTERM)
                self._wait(procs, grace_s, hurry)
            survivors = self._alive(self._tree())
            if survivors:
                killed = len(survivors)
                self._signal_all(survivors, signal.SIGKILL)
                self._wait(survivors, kill_wait_s)
        except KeyboardInterrupt:
            # A second Ctrl-C during the grace period: go straight to SIGKILL.
            survivors = self._alive(self._tree())
            killed = len(survivors)
            self._signal_all(survivors, signal.SIGKILL)
            self._wait(survivors, kill_wait_s)
        left = self._alive(self._tree())
        if self.popen.returncode is None and self.pid not in {p.pid for p in left}:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=1.0)
        return Teardown(
            leftover=len(left),
            leftover_pids=tuple(sorted(p.pid for p in left)),
            killed=killed,
            duration_s=time.monotonic() - started,
            exit_code=self.popen.returncode,
        )

    def _wait(
        self, procs: list[psutil.Process], timeout: float, hurry: Callable[[], bool] | None = None
    ) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.popen.poll()  # reap our own child so it does not linger as a zombie
            if not self._alive(procs) or (hurry is not None and hurry()):
                return
            time.sleep(0.05)
        self.popen.poll()


def describe_exit(code: int | None) -> str:
    """``exit 3`` or ``killed by SIGSEGV`` for a Popen returncode."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit {code}"
