"""A supervised run from start to end: start the server, watch it (``watch.py``), stop it.

Whatever ends the run — failure, success, Ctrl-C, SIGTERM, SIGHUP, a closed output pipe or
an error of ours — the whole process tree is stopped (unless a healthy server is kept
running), the log is kept, and run.json records what happened. If servedoctor itself is
killed, the reaper (``reaper.py``) does the same. The server writes its log straight to a
private file that a tailer masks into ``server.log`` (``logtail.py``): the supervisor never
stands between the server and its output.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import psutil

from servedoctor.engines import engine_for_command
from servedoctor.errors import UserError
from servedoctor.knowledge.registry import default_registry
from servedoctor.launch.endpoint import endpoint_for, flag_value
from servedoctor.launch.failure import complete, diagnose_run
from servedoctor.launch.logtail import RAW_NAME, LogTail, open_raw
from servedoctor.launch.probes import port_open
from servedoctor.launch.process import Server, Teardown, check_command, start_server
from servedoctor.launch.record import add_result, probes_record, run_record
from servedoctor.launch.rundir import LOG_NAME, make_run_dir, write_run_json
from servedoctor.launch.runstate import LOG_WRITE, EventSink
from servedoctor.launch.samples import SampleRecorder
from servedoctor.launch.stale import find_stale_runs, port_holder
from servedoctor.launch.telemetry import GpuTelemetry
from servedoctor.launch.types import Failure, LaunchOptions, Outcome, RunResult
from servedoctor.launch.watch import Watcher
from servedoctor.model import Diagnosis
from servedoctor.redact import redact_text
from servedoctor.remote.launching import RemoteLaunch, forwarded, remote_telemetry

#: This process, as run.json names it (the create time tells a reused pid apart).
_SUPERVISOR = {"pid": os.getpid(), "create_time": psutil.Process().create_time()}
#: Space set aside in the run folder, given back when the disk fills, so that run.json and
#: the end of the log can still be written.
_RESERVE_NAME = ".reserve"
_RESERVE_BYTES = 256 * 1024


def launch(
    argv: Sequence[str], options: LaunchOptions, *, on_event: EventSink | None = None
) -> RunResult:
    """Launch ``argv`` under supervision and return how it went (see module doc)."""
    if options.on is not None:
        return _launch_remote(argv, options, on_event)
    check_command(argv)
    spec = engine_for_command(list(argv))
    endpoint = endpoint_for(spec, argv)
    check_port_free(argv)
    return _Supervisor(list(argv), spec, endpoint, options, on_event).run()


def _launch_remote(
    argv: Sequence[str], options: LaunchOptions, on_event: EventSink | None
) -> RunResult:
    """The command runs on ``options.on`` through SSH (``servedoctor.remote``); probes go
    through a port forward to the port the command names."""
    if not argv:
        check_command(argv)
    if options.keep_running:
        raise UserError("--keep-running is not supported with --on yet")
    assert options.on is not None
    spec = engine_for_command(list(argv))
    remote, endpoint = forwarded(options.on, endpoint_for(spec, argv))
    supervisor = _Supervisor(list(argv), spec, endpoint, options, on_event)
    supervisor.remote = remote
    supervisor.port_from_log = False  # the forward goes to the port the command names
    return supervisor.run()


def check_port_free(argv: Sequence[str]) -> None:
    """Refuse a port the command names that another process already holds: the server could
    not bind it, and a probe would talk to the other process."""
    spec = engine_for_command(list(argv))
    endpoint = endpoint_for(spec, argv)
    if flag_value(argv, spec.port_flags) is None or not port_open(endpoint):
        return
    holder = port_holder(endpoint.port) or " (by a process this user cannot see)"
    raise UserError(
        f"port {endpoint.port} on {endpoint.host} is already taken{holder}; "
        "stop that process or give the server another port"
    )


class _Supervisor(Watcher):
    remote: RemoteLaunch | None = None  # set for a launch on a remote host
    samples: SampleRecorder | None = None  # CPU/RSS samples of a local server's tree

    stopped_by: str | None = None

    def run(self) -> RunResult:
        # Signals are ours before anything starts: SIGINT, SIGTERM and SIGHUP end the run
        # (teardown, run.json, exit 130), and while the server starts they wait, so no
        # instant exists at which a signal leaves a server behind.
        with self.signals.installed():
            failure: Failure | None = None
            outcome: Outcome = "interrupted"
            started = False
            try:
                with self.signals.held():
                    self._spawn()
                    started = True
                self.emit(
                    "started", f"{self.spec.display} pid {self.proc.pid}", {"pid": self.proc.pid}
                )
                failure = self._watch()
                outcome = "healthy" if failure is None else "failed"
            except KeyboardInterrupt:
                if not started:
                    raise  # interrupted before the server started (a usage error path)
                if self.attached_at is not None:  # healthy until it was told to stop
                    outcome = "healthy"
                    last = self.signals.last
                    self.stopped_by = signal.Signals(last).name if last else "output closed"
            except BaseException as exc:
                if started:  # a crash of ours: stop the server, record it, re-raise
                    with self.signals.held(reraise=False):
                        self._abort(exc)
                raise
            with self.signals.held(reraise=False):
                return self._finish(outcome, failure)

    def _spawn(self) -> None:
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
        self.gpu = (
            GpuTelemetry() if self.remote is None else remote_telemetry(self.remote, self.warnings)
        )
        self._write(outcome="running")
        self._reserve()
        raw = open_raw(self.run_dir)
        try:
            self.tail = LogTail(self.run_dir / RAW_NAME, self.log_path, self.lines)
            self.proc = start_server(
                self.argv,
                env=opt.env,
                run_dir=self.run_dir,
                grace_s=opt.grace_s,
                output_fd=raw,
                remote=self.remote,
            )
        except OSError as exc:
            self._write(outcome="failed", error=f"cannot start: {exc.strerror or exc}")
            raise UserError(f"cannot start {self.argv[0]}: {exc.strerror or exc}") from None
        finally:
            os.close(raw)  # the server holds it now
        self.tail.start()
        if self.remote is None:  # a remote server's pid means nothing to this host's psutil
            self.samples = SampleRecorder.begin(self.run_dir, self.proc.pid, t0=self.t0)
        # load the knowledge rules while the server starts, not after it dies
        self.warmup = threading.Thread(target=default_registry, name="rules-warmup", daemon=True)
        self.warmup.start()
        self._write(outcome="running")

    def _reserve(self) -> None:
        with contextlib.suppress(OSError):
            fd = os.open(self.run_dir / _RESERVE_NAME, os.O_WRONLY | os.O_CREAT, 0o600)
            try:
                os.posix_fallocate(fd, 0, _RESERVE_BYTES)
            finally:
                os.close(fd)

    def _unreserve(self) -> None:
        with contextlib.suppress(OSError):
            (self.run_dir / _RESERVE_NAME).unlink()

    def _abort(self, exc: BaseException) -> None:
        """Our own error ended the run: stop the tree and say so in run.json."""
        self.finishing = True
        teardown = self.proc.stop(grace_s=self.opt.grace_s, hurry=self.signals.hurry())
        self._unreserve()
        with contextlib.suppress(Exception):
            self.tail.finish(self._count)
        self._write(outcome="error", teardown=teardown, error=f"{type(exc).__name__}: {exc}")
        self.proc.release(keep=False)

    def _finish(self, outcome: Outcome, failure: Failure | None) -> RunResult:
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
        self.warnings.extend(n for n in self.proc.notes if n not in self.warnings)
        self._unreserve()  # the disk may be full: run.json and the log's end need room
        # run.json says what was stopped before anything slower (the log's end) can fail
        self._write(outcome=outcome, teardown=teardown)
        if not keep:
            self._drain(0.0)
            disk_full = failure is not None and failure.kind == LOG_WRITE
            self.tail.finish(self._count, read_rest=not disk_full)
            if not self.tail.complete:
                self.warnings.append(
                    "server.log is incomplete (the log could not be written); the rest, "
                    f"unmasked, is in the private {self.run_dir / RAW_NAME}"
                )
        if self.samples is not None:
            self.samples.stop()
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
            diagnosis = self._diagnose(failure)
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
            attached_s=None if self.attached_at is None else now - self.attached_at,
            stopped_by=self.stopped_by,
        )
        self._write(result=result, teardown=teardown)
        self.proc.release(keep=keep)
        # a daemon thread still inside libyaml when the interpreter exits can abort it
        self.warmup.join(timeout=10.0)
        self.emit("done", outcome, result.to_dict())
        return result

    def _diagnose(self, failure: Failure) -> Diagnosis:
        try:
            return diagnose_run(self.log_path, failure, engine=self.spec.name, argv=self.argv)
        except UserError:  # an empty log (the disk was full before its first line)
            empty = Diagnosis(str(self.log_path), None, None, None, None, "")
            return complete(empty, failure, log=self.log_path, engine=self.spec.name)

    def _hand_over_log(self) -> None:
        """--keep-running: a relay process goes on masking the raw log into server.log."""
        self.tail.stop()
        self._drain(0.0)
        # The relay cannot join the server's group (another session); it ends when no
        # process of the group is left.
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "servedoctor.launch.relay",
                str(self.run_dir / RAW_NAME),
                str(self.log_path),
                str(self.tail.transcribed),
                str(self.proc.pgid),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            start_new_session=True,
        )
        self.tail.close()

    # -- run.json -----------------------------------------------------------------------
    def _write(
        self,
        *,
        outcome: str | None = None,
        result: RunResult | None = None,
        teardown: Teardown | None = None,
        error: str | None = None,
    ) -> None:
        proc: Server | None = getattr(self, "proc", None)
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
        if self.remote is not None:
            record["on"] = self.remote.target.url
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
        try:
            write_run_json(self.run_dir, record)
        except OSError as exc:
            if proc is None:
                raise  # the server has not started: a plain error
            warning = f"cannot write run.json: {exc}"  # the disk is full even so
            if warning not in self.warnings:
                self.warnings.append(warning)
