"""The supervision loop: start the server, follow its phases, probe it, judge it, stop it.

Failure is any of: the process exits, the log prints a fatal line, the port closes, a
generation request errors or times out, or a phase makes no progress (no log line and no
probe answer) for its stall timeout. Whatever ends the run — failure, success, Ctrl-C,
SIGTERM, SIGHUP, a closed output pipe or an error of ours — the whole process tree is stopped
(unless a healthy server is kept running), the log is kept, and run.json records what
happened. If servedoctor itself is killed, the reaper (``reaper.py``) does the same.
"""

from __future__ import annotations

import contextlib
import os
import queue
import select
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import Any, Literal

import httpx
import psutil

from servedoctor.engines import EngineSpec, engine_for_command
from servedoctor.errors import UserError
from servedoctor.knowledge.registry import default_registry
from servedoctor.launch.endpoint import Endpoint, endpoint_for
from servedoctor.launch.failure import diagnose_run
from servedoctor.launch.probes import check_health, model_name, port_open
from servedoctor.launch.process import ServerProcess, Teardown, check_command, describe_exit
from servedoctor.launch.record import add_result, probes_record, run_record
from servedoctor.launch.requests import ProbeRequest, probe_message, start_request
from servedoctor.launch.rundir import LOG_NAME, LogLine, LogPump, make_run_dir, write_run_json
from servedoctor.launch.stale import find_stale_runs, port_holder
from servedoctor.launch.telemetry import GpuTelemetry
from servedoctor.launch.timeline import Timeline
from servedoctor.launch.types import (
    EventKind,
    Failure,
    FailureKind,
    LaunchEvent,
    LaunchOptions,
    Outcome,
    RunResult,
    SmokeResult,
)
from servedoctor.model import Diagnosis
from servedoctor.redact import redact_text

EventSink = Callable[[LaunchEvent], None]

#: This process, as run.json names it (the create time tells a reused pid apart).
_SUPERVISOR = {"pid": os.getpid(), "create_time": psutil.Process().create_time()}

_READY_POLL_S = 0.5  # port/health poll before ready
_PORT_POLL_S = 2.0  # port check while serving
_SNAPSHOT_S = 2.0  # descendant snapshot (for teardown of processes that leave the group)
_GPU_POLL_S = 1.0
_FATAL_SETTLE_S = 3.0  # after a fatal line, let the traceback that follows reach the log
_FATAL_QUIET_S = 0.5
_EXIT_SETTLE_S = 1.0  # after a request error, how long to wait for the process to die


def launch(
    argv: Sequence[str], options: LaunchOptions, *, on_event: EventSink | None = None
) -> RunResult:
    """Launch ``argv`` under supervision and return how it went (see module doc)."""
    check_command(argv)
    spec = engine_for_command(list(argv))
    endpoint = endpoint_for(spec, argv)
    return _Supervisor(list(argv), spec, endpoint, options, on_event).run()


class _Supervisor:
    def __init__(
        self,
        argv: list[str],
        spec: EngineSpec,
        endpoint: Endpoint,
        options: LaunchOptions,
        on_event: EventSink | None,
    ) -> None:
        self.argv = argv
        self.spec = spec
        self.endpoint = endpoint
        self.opt = options
        self.on_event = on_event
        self.t0 = time.monotonic()
        self.lines: queue.Queue[LogLine | None] = queue.Queue()
        self.timeline = Timeline(spec, t0=self.t0)
        self.client = httpx.Client(trust_env=False)
        self.warnings: list[str] = []
        self.smoke: SmokeResult | None = None
        self.liveness: SmokeResult | None = None
        self.health_after_failure: dict[str, Any] | None = None
        self.ready_at: float | None = None
        self.last_activity = self.t0
        self.last_line_number = 0
        self.model: str | None = None
        self.signals = _StopSignals()
        self.finishing = False

    # -- events -----------------------------------------------------------------------
    def emit(self, kind: EventKind, message: str = "", data: dict[str, Any] | None = None) -> None:
        if self.on_event is None:
            return
        event = LaunchEvent(kind, self.now(), self.timeline.phase, message, data or {})
        try:
            self.on_event(event)
        except (OSError, SystemExit) as exc:
            # output closed (``| head``, a lost terminal; rich turns EPIPE into SystemExit):
            # end like Ctrl-C
            self.on_event = None
            self.warnings.append(f"output closed ({exc}); run stopped")
            if not self.finishing:
                raise KeyboardInterrupt from None

    def now(self) -> float:
        return time.monotonic() - self.t0

    # -- the run ------------------------------------------------------------------------
    def run(self) -> RunResult:
        # Signals are ours before anything starts: SIGINT, SIGTERM and SIGHUP end the run
        # (teardown, run.json, exit 130), and while the server starts they wait, so no
        # instant exists at which a signal leaves a server behind.
        with self.signals.installed():
            failure: Failure | None = None
            outcome: Outcome = "interrupted"
            log: Any = None
            try:
                with self.signals.held():
                    log = self._spawn()
                self.emit(
                    "started", f"{self.spec.display} pid {self.proc.pid}", {"pid": self.proc.pid}
                )
                failure = self._watch()
                outcome = "healthy" if failure is None else "failed"
            except KeyboardInterrupt:
                if log is None:
                    raise  # interrupted before the server started (a usage error path)
            except BaseException as exc:
                if log is not None:  # a crash of ours: stop the server, record it, re-raise
                    with self.signals.held(reraise=False):
                        self._abort(log, exc)
                raise
            with self.signals.held(reraise=False):
                return self._finish(outcome, failure, log)

    def _spawn(self) -> Any:
        opt = self.opt
        self.run_dir = make_run_dir(Path(opt.runs_dir), self.spec.name)
        self.log_path = self.run_dir / LOG_NAME
        self.started_at = datetime.now().astimezone().isoformat(timespec="seconds")
        for stale in find_stale_runs(Path(opt.runs_dir)):
            self.warnings.append(stale.line())
        if port_open(self.endpoint):
            self.warnings.append(
                f"port {self.endpoint.port} on {self.endpoint.host} was already in use "
                f"before launch{port_holder(self.endpoint.port)}; readiness needs the "
                "engine's ready line"
            )
        self.gpu = GpuTelemetry()
        self._write(outcome="running")
        log = open(self.log_path, "ab")  # noqa: SIM115  (closed in _finish)
        try:
            self.proc = ServerProcess(
                self.argv, env=opt.env, run_dir=self.run_dir, grace_s=opt.grace_s
            )
        except OSError as exc:
            log.close()
            self._write(outcome="failed", error=f"cannot start: {exc.strerror or exc}")
            raise UserError(f"cannot start {self.argv[0]}: {exc.strerror or exc}") from None
        self.pump = LogPump(self.proc.stdout_fd, log, self.lines)
        self.pump.start()
        # load the knowledge rules while the server starts, not after it dies
        self.warmup = threading.Thread(target=default_registry, name="rules-warmup", daemon=True)
        self.warmup.start()
        self._write(outcome="running")
        return log

    def _abort(self, log: Any, exc: BaseException) -> None:
        """Our own error ended the run: stop the tree and say so in run.json."""
        self.finishing = True
        teardown = self.proc.stop(grace_s=self.opt.grace_s, hurry=self.signals.hurry())
        with contextlib.suppress(Exception):
            log.close()
        self._write(outcome="error", teardown=teardown, error=f"{type(exc).__name__}: {exc}")
        self.proc.release(keep=False)

    def _finish(self, outcome: Outcome, failure: Failure | None, log: Any) -> RunResult:
        self.finishing = True
        if failure is not None:
            self.emit("failure", failure.detail, failure.to_dict())
        keep = outcome == "healthy" and self.opt.keep_running
        teardown: Teardown | None = None
        # Teardown runs whatever ended the run; a second signal escalates to SIGKILL.
        if keep:
            try:
                self._hand_over_log()
            except OSError as exc:
                self.warnings.append(f"could not keep the server running: {exc}")
                keep = False
        if not keep:
            self.emit("teardown", "stopping the process tree")
            teardown = self.proc.stop(grace_s=self.opt.grace_s, hurry=self.signals.hurry())
            self.pump.eof.wait(timeout=2.0)
        # run.json says what was stopped before anything slower (diagnosis) can fail
        self._write(outcome=outcome, teardown=teardown)
        self._drain(0.0)
        log.close()
        run_pids = [self.proc.pid]
        gpu = None if keep else self.gpu.confirm_released(run_pids)
        self.gpu.close()
        if gpu is not None:
            self.emit(
                "gpu",
                "GPU memory released" if gpu.released else "GPU memory held",
                gpu.to_dict(),
            )
        diagnosis: Diagnosis | None = None
        if failure is not None:
            diagnosis = diagnose_run(self.log_path, failure, engine=self.spec.name, argv=self.argv)
        self.client.close()
        now = self.now()
        result = RunResult(
            outcome=outcome,
            run_dir=self.run_dir,
            phases=self.timeline.spans(now=None if keep else now),
            smoke=self.smoke,
            diagnosis=diagnosis,
            leftover_processes=0 if teardown is None else teardown.leftover,
            exit_code=self.proc.returncode,
            gpu_peak_mib=self.gpu.peak_mib if self.gpu.available else None,
            duration_s=now,
            liveness=self.liveness,
            failure=failure,
            engine=self.spec.name,
            pid=self.proc.pid,
            gpu=gpu,
            kept_running=keep,
        )
        self._write(result=result, teardown=teardown)
        self.proc.release(keep=keep)
        # a daemon thread still inside libyaml when the interpreter exits can abort it
        self.warmup.join(timeout=10.0)
        self.emit("done", outcome, result.to_dict())
        return result

    def _hand_over_log(self) -> None:
        """--keep-running: a relay process keeps appending the server's output to the log."""
        self.pump.stop()
        self._drain(0.0)
        # The relay cannot join the server's group (another session); it ends on EOF, when
        # the last process of the server closes the pipe.
        subprocess.Popen(
            [sys.executable, "-m", "servedoctor.launch.relay", str(self.log_path)],
            stdin=self.proc.stdout_fd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            start_new_session=True,
        )

    # -- the loop -----------------------------------------------------------------------
    def _watch(self) -> Failure | None:
        opt = self.opt
        stage: Literal["wait_ready", "smoke", "liveness", "after_failure"] = "wait_ready"
        request: ProbeRequest | None = None
        pending: Failure | None = None
        next_probe = next_port = next_snapshot = next_gpu = 0.0
        fatal_at: float | None = None
        while True:
            self._drain(opt.poll_s)
            if self.on_event is not None and output_closed():
                self.warnings.append("output closed (its reader left); run stopped")
                raise KeyboardInterrupt  # ``| head`` exited: end like Ctrl-C
            mono = time.monotonic()
            code = self.proc.poll()
            if self.timeline.fatal_line is not None and fatal_at is None:
                fatal_at = mono
            if fatal_at is not None:
                quiet = mono - self.pump.last_read >= _FATAL_QUIET_S
                if code is not None or quiet or mono - fatal_at >= _FATAL_SETTLE_S:
                    return self._fatal_failure(code)
            if code is not None:
                if pending is not None:
                    return pending
                phase = self._phase(request)
                self._settle_request(request, stage)
                return self._failure(
                    "process_exit", f"server process ended: {describe_exit(code)}", phase
                )
            if mono >= next_snapshot:
                next_snapshot = mono + _SNAPSHOT_S
                self.proc.snapshot()
            if self.gpu.available and mono >= next_gpu:
                next_gpu = mono + _GPU_POLL_S
                used = self.gpu.sample(self.proc.pids())
                if used is not None:
                    self.emit(
                        "gpu", f"{used:.0f} MiB", {"used_mib": used, "peak_mib": self.gpu.peak_mib}
                    )

            if stage == "wait_ready":
                if mono >= next_probe or (self.timeline.ready_seen and self.ready_at is None):
                    next_probe = mono + _READY_POLL_S
                    if self._probe_ready():
                        self.ready_at = self.now()
                        self.timeline.mark_ready(mono)
                        self.emit("ready", f"ready after {self.ready_at:.1f} s")
                        self.model = model_name(self.client, self.endpoint)
                        request = self._start("smoke")
                        stage = "smoke"
                        continue
                if opt.startup_timeout is not None and self.now() > opt.startup_timeout:
                    return self._failure(
                        "startup_timeout",
                        f"not ready after {opt.startup_timeout:g} s (--startup-timeout)",
                        self.timeline.phase,
                    )
                stall = opt.stall_timeout(self.timeline.phase)
                if mono - self.last_activity > stall:
                    return self._failure(
                        "stall",
                        f"no log line and no probe answer for {stall:g} s in phase "
                        f"{self.timeline.phase} (last: {self.timeline.label})",
                        self.timeline.phase,
                    )
                continue

            assert request is not None
            if mono >= next_port:
                next_port = mono + _PORT_POLL_S
                if not port_open(self.endpoint) and self.proc.poll() is None:
                    return self._failure(
                        "port_closed",
                        f"port {self.endpoint.port} stopped accepting connections",
                        self._phase(request),
                    )
            if not request.done:
                if not request.overdue(mono):
                    continue
                request.result = request.unanswered(mono, t0=self.t0)
            result = request.result
            assert result is not None
            self.emit("probe", probe_message(result), result.to_dict())
            if stage == "smoke":
                self.smoke = result
            else:
                self.liveness = result
            if stage == "after_failure":
                return pending
            if result.ok:
                if stage == "liveness":
                    return None
                request, stage = self._start("liveness"), "liveness"
                continue
            failure = self._request_failure(request, result)
            if failure.kind == "process_exit" or result.timed_out or stage == "liveness":
                return failure
            # The server answered with an error: is it still able to generate?
            pending = failure
            request, stage = self._start("liveness"), "after_failure"

    def _settle_request(self, request: ProbeRequest | None, stage: str) -> None:
        """The server died under a request: give it a moment to end, and record it."""
        if request is None or request.thread is None:
            return
        request.thread.join(timeout=_EXIT_SETTLE_S)
        if request.result is None:
            return
        if stage == "smoke":
            self.smoke = request.result
        elif stage in ("liveness", "after_failure"):
            self.liveness = request.result

    def _probe_ready(self) -> bool:
        if self.warnings and not self.timeline.ready_seen:
            return False  # the port belongs to someone else until the engine says ready
        if not port_open(self.endpoint):
            return False
        health = check_health(self.client, self.endpoint)
        if health.status is not None:
            self.last_activity = time.monotonic()
        return health.ok

    def _start(self, kind: Literal["smoke", "liveness"]) -> ProbeRequest:
        request = start_request(
            self.client, self.endpoint, self.opt, kind, model=self.model, t0=self.t0
        )
        self.emit("probe", f"{kind} request sent", {"kind": kind})
        return request

    def _request_failure(self, request: ProbeRequest, result: SmokeResult) -> Failure:
        phase = self._phase(request)
        what = f"{request.kind} request: {result.error}"
        deadline = time.monotonic() + _EXIT_SETTLE_S
        while not result.timed_out and time.monotonic() < deadline:
            code = self.proc.poll()
            if code is not None:
                return self._failure(
                    "process_exit",
                    f"server process ended: {describe_exit(code)}, during the {what}",
                    phase,
                )
            time.sleep(0.05)
        if result.timed_out:
            health = check_health(self.client, self.endpoint)
            self.health_after_failure = {
                "ok": health.ok,
                "status": health.status,
                "path": health.path,
                "error": health.error,
            }
            note = (
                f"; {health.path} still answered {health.status}"
                if health.status is not None
                else ""
            )
            return self._failure("request_timeout", f"{what}{note}", phase)
        kind: FailureKind = "request_error"
        if result.error and result.error.startswith("reply does not match"):
            kind = "unexpected_text"
        elif result.error == "the reply generated no token":
            kind = "no_tokens"
        return self._failure(kind, what, phase)

    def _fatal_failure(self, code: int | None) -> Failure:
        assert self.timeline.fatal_line is not None
        number, text = self.timeline.fatal_line
        tail = "" if code is None else f" (then the server process ended: {describe_exit(code)})"
        return self._failure(
            "fatal_line",
            f"fatal log line {number}: {text.strip()}{tail}",
            self.timeline.phase,
            line=number,
        )

    def _phase(self, request: ProbeRequest | None) -> str:
        """The phase to blame: decode once a request has streamed a token."""
        failed_or_running = request is not None and (
            request.result is None or not request.result.ok
        )
        if request is not None and failed_or_running and request.progress.tokens > 0:
            return "decode"
        return self.timeline.phase

    def _failure(
        self, kind: FailureKind, detail: str, phase: str, *, line: int | None = None
    ) -> Failure:
        return Failure(kind, phase, redact_text(detail), self.now(), line, self.last_line_number)

    def _drain(self, timeout: float) -> None:
        """Take the log lines read so far (waiting up to ``timeout`` for the first)."""
        try:
            item = self.lines.get(timeout=timeout) if timeout > 0 else self.lines.get_nowait()
        except queue.Empty:
            return
        while True:
            if item is not None:
                self._take(item)
            try:
                item = self.lines.get_nowait()
            except queue.Empty:
                return

    def _take(self, line: LogLine) -> None:
        if not line.partial and line.text:
            self.last_line_number = line.number
        self.last_activity = max(self.last_activity, line.t)
        facts = self.timeline.feed(line.number, line.text, line.t, partial=line.partial)
        if self.on_event is not None and not line.partial:
            self.emit("line", line.text, {"number": line.number})
        if facts.phase_changed:
            self.emit("phase", self.timeline.label, {"phase": self.timeline.phase})
        if facts.progress is not None:
            p = facts.progress
            self.emit(
                "progress",
                p.name,
                {"name": p.name, "done": p.done, "total": p.total, "fraction": p.fraction},
            )
        if facts.memory is not None:
            self.emit("memory", facts.memory[0], {"name": facts.memory[0], "gib": facts.memory[1]})

    # -- run.json -----------------------------------------------------------------------
    def _write(
        self,
        *,
        outcome: str | None = None,
        result: RunResult | None = None,
        teardown: Teardown | None = None,
        error: str | None = None,
    ) -> None:
        proc: ServerProcess | None = getattr(self, "proc", None)
        record = run_record(
            outcome=outcome,
            engine=self.spec.name,
            argv=self.argv,
            options=self.opt,
            endpoint_url=self.endpoint.base_url,
            started_at=self.started_at,
            run_dir=self.run_dir,
            log_path=self.log_path,
            pid=None if proc is None else proc.pid,
            warnings=self.warnings,
            phases=self.timeline.spans(now=self.now()),
            supervisor=_SUPERVISOR,
            reaper_pid=None if proc is None or proc.reaper is None else proc.reaper.pid,
            run_id=None if proc is None else proc.run_id,
        )
        if error is not None:
            record["error"] = redact_text(error)
        if result is None and teardown is not None:
            record["teardown"] = teardown.to_dict()
        if result is not None:
            probes = probes_record(
                ready_at=self.ready_at,
                model=self.model,
                smoke=self.smoke,
                liveness=self.liveness,
                health_after_failure=self.health_after_failure,
            )
            stop_with = f"kill -TERM -- -{self.proc.pgid}" if result.kept_running else None
            add_result(
                record,
                result,
                timeline=self.timeline,
                probes=probes,
                teardown=teardown,
                stop_with=stop_with,
            )
        write_run_json(self.run_dir, record)


def output_closed(fds: Sequence[int] = (1, 2)) -> bool:
    """Whether stdout or stderr is a pipe whose reader has gone (the next write fails)."""
    poller = select.poll()
    for fd in fds:
        with contextlib.suppress(OSError):
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                poller.register(fd, 0)  # errors are reported whatever the mask
    return any(event & select.POLLERR for _, event in poller.poll(0))


class _StopSignals:
    """SIGINT, SIGTERM and SIGHUP end the run like Ctrl-C; while :meth:`held`, they wait."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self.count = 0  # signals received
        self._holding = False
        self._pending = False

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1
        if self._holding:
            self._pending = True
        else:
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield  # only the main thread can handle signals
            return
        previous = {sig: signal.signal(sig, self._handler) for sig in self.SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    @contextlib.contextmanager
    def held(self, *, reraise: bool = True) -> Iterator[None]:
        """Signals arriving inside wait until the end (``reraise``) or are only counted."""
        self._holding, self._pending = True, False
        try:
            yield
        finally:
            self._holding = False
        if self._pending and reraise:
            raise KeyboardInterrupt

    def hurry(self) -> Callable[[], bool]:
        """True once a further signal arrives (a second Ctrl-C: skip the grace period)."""
        seen = self.count
        return lambda: self.count > seen
