"""A server started on a remote host through ``ssh`` and the agent (``agent.py``).

The local end of a remote run, with the interface of :class:`~servedoctor.launch.process.
ServerProcess` that the supervisor uses (``poll``, ``stop``, ``release``, ``pid`` …):

* ``ssh`` runs in its own session (a Ctrl-C here reaches servedoctor only, which then tears
  down in order); its stdout *is* the run's raw log file, so the server's output is kept
  here as it arrives and nothing of ours stands in its way;
* its stdin is a pipe only this process holds: the first line carries the server's extra
  environment (JSON, never on a command line), a later ``stop`` asks the agent to stop the
  tree, and the pipe's end — this process died, or the connection dropped — makes the agent
  stop it anyway;
* its stderr carries the agent's control lines (``@servedoctor started pid=N`` …); any
  other line there (ssh's own errors, the login shell's) is appended to the raw log, so the
  diagnosis sees ``Connection refused`` or ``python3: command not found``;
* when the agent cannot be heard after teardown (the connection dropped), a second
  connection runs the agent's ``reap`` mode to confirm the run's processes are gone.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import IO

from servedoctor.launch.process import Reaper, Teardown
from servedoctor.redact import redact_text
from servedoctor.remote.agent import TAG
from servedoctor.remote.ssh import CONNECT_TIMEOUT_S, Forward, agent_argv, run_agent, ssh_argv
from servedoctor.remote.url import SshTarget

_STARTED_WAIT_S = CONNECT_TIMEOUT_S + 30.0  # connect, log in, start the agent
_REPORT_SLACK_S = 15.0  # beyond grace + SIGKILL wait, for the agent's report to arrive
_REAP_WAIT_S = 20.0


def parse_control(line: str) -> tuple[str, dict[str, str]] | None:
    """``@servedoctor WORD k=v ...`` → (WORD, {k: v}); None for any other line."""
    if not line.startswith(TAG + " "):
        return None
    words = line[len(TAG) + 1 :].split()
    if not words:
        return None
    fields = dict(w.split("=", 1) for w in words[1:] if "=" in w)
    return words[0], fields


def _pids(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(",") if p.isdigit())


class RemoteServerProcess:
    """One server command on ``target``, supervised through one SSH connection."""

    reaper: Reaper | None = None  # the agent is the reaper, at the far end of the pipe

    def __init__(
        self,
        argv: Sequence[str],
        *,
        target: SshTarget,
        env: Mapping[str, str] | None = None,
        grace_s: float = 10.0,
        output_fd: int,
        forward: Forward | None = None,
    ) -> None:
        self.target = target
        self.run_id = uuid.uuid4().hex
        self.grace_s = grace_s
        self.notes: list[str] = []  # for the run's warnings
        self.remote_pid: int | None = None
        self._remote_code: int | None = None
        self._report: dict[str, str] | None = None
        self._started = threading.Event()
        self._reported = threading.Event()
        remote = agent_argv(target, "run", self.run_id, repr(float(grace_s)), "--", *argv)
        command = ssh_argv(target, remote, forwards=() if forward is None else (forward,))
        self._log_fd = os.dup(output_fd)
        try:
            self.popen = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=output_fd,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except BaseException:
            os.close(self._log_fd)
            raise
        assert self.popen.stdin is not None and self.popen.stderr is not None
        self._stdin: IO[bytes] | None = self.popen.stdin
        self._send(json.dumps({"env": dict(env or {})}))
        self._reader = threading.Thread(
            target=self._read, args=(self.popen.stderr,), name="ssh-stderr", daemon=True
        )
        self._reader.start()
        deadline = time.monotonic() + _STARTED_WAIT_S
        while not self._started.wait(0.05):
            if self.popen.poll() is not None or time.monotonic() > deadline:
                break
        self.pid = self.remote_pid if self.remote_pid is not None else self.popen.pid
        self.pgid = self.pid

    # -- the connection ---------------------------------------------------------------
    def _send(self, line: str) -> None:
        if self._stdin is None:
            return
        with contextlib.suppress(OSError, ValueError):
            self._stdin.write(line.encode() + b"\n")
            self._stdin.flush()

    def _close_stdin(self) -> None:
        if self._stdin is not None:
            with contextlib.suppress(OSError, ValueError):
                self._stdin.close()
            self._stdin = None

    def _read(self, stream: IO[bytes]) -> None:
        try:
            for raw in stream:
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                control = parse_control(line)
                if control is None:
                    self._log(line)
                    continue
                word, fields = control
                if word == "started" and fields.get("pid", "").isdigit():
                    self.remote_pid = int(fields["pid"])
                    self._started.set()
                elif word == "exit":
                    with contextlib.suppress(ValueError):
                        self._remote_code = int(fields.get("code", ""))
                    self._started.set()
                elif word == "stopped":
                    self._report = fields
                    self._reported.set()
        finally:
            self._reported.set()  # stderr ended: nothing more will come
            with contextlib.suppress(OSError):
                os.close(self._log_fd)

    def _log(self, line: str) -> None:
        """A line of ssh or of the login shell: into the raw log (masked), and noted."""
        if not line.strip():
            return
        text = redact_text(line)
        self.notes.append(f"ssh: {text}")
        with contextlib.suppress(OSError):
            os.write(self._log_fd, f"[ssh] {text}\n".encode())

    # -- the ServerProcess interface --------------------------------------------------
    def poll(self) -> int | None:
        """The remote server's exit status once the agent said so; ssh's own when the
        connection ended first (255: ssh failed; -9: the client was killed)."""
        if self._remote_code is not None:
            return self._remote_code
        code = self.popen.poll()
        if code is not None and self._remote_code is None:
            self._reader.join(timeout=1.0)  # the exit line may still be in the pipe
            if self._remote_code is not None:
                return self._remote_code
        return code

    @property
    def returncode(self) -> int | None:
        return self.poll()

    @property
    def connected(self) -> bool:
        return self.popen.poll() is None

    def snapshot(self) -> int:
        return 0  # the agent follows the remote tree by its process group and marker

    def pids(self) -> set[int]:
        return set()  # remote pids mean nothing to this host's NVML

    def release(self, *, keep: bool) -> None:
        """The run ended; closing stdin tells the agent to stop the tree if it still runs."""
        self._close_stdin()

    def stop(
        self,
        *,
        grace_s: float = 10.0,
        kill_wait_s: float = 5.0,
        hurry: Callable[[], bool] | None = None,
    ) -> Teardown:
        """Ask the agent to stop the tree, wait for its report; reconnect if none came."""
        started = time.monotonic()
        self._send("stop")
        deadline = started + grace_s + kill_wait_s + _REPORT_SLACK_S
        hurried = False
        try:
            while not self._reported.wait(0.05):
                if not hurried and hurry is not None and hurry():
                    self._send("kill")  # a second Ctrl-C: the agent skips the grace period
                    hurried = True
                if time.monotonic() > deadline:
                    break
        except KeyboardInterrupt:
            self._send("kill")
            self._reported.wait(kill_wait_s + _REPORT_SLACK_S)
        self._close_stdin()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=5.0)
        if self.popen.poll() is None:
            self.popen.kill()  # the agent stops the tree when our end of the channel closes
            self.popen.wait()
        report, confirmed = self._report, True
        if report is None:
            report, confirmed = self._reap()
        leftover = _pids(report.get("pids", "")) if report else ()
        return Teardown(
            leftover=int(report.get("leftover", "0")) if report else 0,
            leftover_pids=leftover,
            killed=int(report.get("killed", "0")) if report else 0,
            duration_s=time.monotonic() - started,
            exit_code=self.returncode,
            confirmed=confirmed,
        )

    def _reap(self) -> tuple[dict[str, str] | None, bool]:
        """The connection dropped: a new one checks (and ends) what carries the marker."""
        try:
            done = run_agent(
                self.target,
                "reap",
                self.run_id,
                repr(_REAP_WAIT_S),
                timeout=_STARTED_WAIT_S + _REAP_WAIT_S,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            self.notes.append(f"could not reconnect to confirm the server stopped: {exc}")
            return None, False
        for line in done.stderr.splitlines():
            control = parse_control(line)
            if control is not None and control[0] == "reaped":
                self.notes.append(
                    f"the connection to {self.target.url} dropped; a new connection confirmed "
                    "the remote server stopped"
                    if control[1].get("leftover") == "0"
                    else f"the connection to {self.target.url} dropped; processes were left"
                )
                return control[1], True
        last = (done.stderr.strip().splitlines() or ["no answer"])[-1]
        self.notes.append(
            f"could not reconnect to {self.target.url} to confirm the server stopped: "
            f"{redact_text(last)}"
        )
        return None, False
