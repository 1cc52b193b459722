"""The supervision loop: follow the server's phases, probe it, judge it.

Failure is any of: the process exits, the log prints a fatal line, the log cannot be written
(disk full), the port closes, a generation request errors or times out, or a phase makes no
progress (no log line and no probe answer) for its stall timeout.

Attached (``launch`` without ``--exit-after-smoke`` or ``--detach``), the watch goes on after
a healthy smoke test: the same process, log and port checks, and a generation probe every
``probe_every_s``, until the server fails (diagnosed in place) or a signal stops it.
"""

from __future__ import annotations

import time
from typing import Literal

from servedoctor.launch.probes import check_health, model_name, port_open
from servedoctor.launch.process import describe_exit
from servedoctor.launch.requests import ProbeRequest, probe_message, start_request
from servedoctor.launch.runstate import RunState
from servedoctor.launch.signals import output_closed
from servedoctor.launch.types import Failure, FailureKind, SmokeResult
from servedoctor.launch.usage import TreeSampler

_READY_POLL_S = 0.5  # port/health poll before ready
_PORT_POLL_S = 2.0  # port check while serving
_SNAPSHOT_S = 2.0  # descendant snapshot (for teardown of processes that leave the group)
_GPU_POLL_S = 1.0
_USAGE_POLL_S = 1.0  # CPU/RSS of the tree, where there is no GPU
_FATAL_SETTLE_S = 3.0  # after a fatal line, let the traceback that follows reach the log
_FATAL_QUIET_S = 0.5
_EXIT_SETTLE_S = 1.0  # after a request error, how long to wait for the process to die

Stage = Literal["wait_ready", "smoke", "liveness", "after_failure", "attached"]


class Watcher(RunState):
    """The loop of a run whose server is started (``proc``, ``tail``); see the module doc."""

    def _watch(self) -> Failure | None:
        opt = self.opt
        stage: Stage = "wait_ready"
        request: ProbeRequest | None = None
        pending: Failure | None = None
        next_probe = next_port = next_snapshot = next_gpu = 0.0
        usage = TreeSampler()
        fatal_at: float | None = None
        while True:
            self._drain(opt.poll_s)
            if self.on_event is not None and output_closed():
                self.warnings.append("output closed (its reader left); run stopped")
                raise KeyboardInterrupt  # ``| head`` exited: end like Ctrl-C
            mono = time.monotonic()
            code = self.proc.poll()
            log_failure = self._log_failure(code)
            if log_failure is not None:
                return log_failure
            if self.timeline.fatal_line is not None and fatal_at is None:
                fatal_at = mono
            if fatal_at is not None:
                quiet = mono - self.tail.last_read >= _FATAL_QUIET_S
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
            if mono >= next_gpu and (self.gpu.available or self.on_event is not None):
                next_gpu = mono + (_GPU_POLL_S if self.gpu.available else _USAGE_POLL_S)
                self._sample_usage(usage)

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

            if stage == "attached":
                if mono >= next_port:
                    next_port = mono + _PORT_POLL_S
                    if not port_open(self.endpoint) and self.proc.poll() is None:
                        return self._failure(
                            "port_closed",
                            f"port {self.endpoint.port} stopped accepting connections",
                            self._phase(request),
                        )
                if request is None:
                    if opt.probe_every_s > 0 and mono >= next_probe:
                        request = self._start("liveness", quiet=True)
                    continue
                if not request.done:
                    if not request.overdue(mono):
                        continue
                    request.result = request.unanswered(mono, t0=self.t0)
                result = request.result
                assert result is not None
                self.liveness = result
                if not result.ok:
                    self.emit("probe", probe_message(result), result.to_dict())
                    return self._request_failure(request, result)
                self.probes_ok += 1
                self.emit("probe", f"probe {self.probes_ok} ok", result.to_dict())
                request, next_probe = None, mono + opt.probe_every_s
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
                if stage == "liveness" and not opt.attach:
                    return None
                if stage == "liveness":
                    self.attached_at = self.now()
                    every = f"every {opt.probe_every_s:g} s" if opt.probe_every_s > 0 else "off"
                    self.emit(
                        "attached",
                        f"serving at {self.endpoint.base_url} · attached, probes {every} "
                        "· Ctrl-C stops it",
                        {"url": self.endpoint.base_url, "probe_every_s": opt.probe_every_s},
                    )
                    request, stage = None, "attached"
                    next_probe = mono + opt.probe_every_s
                    continue
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
        elif stage in ("liveness", "after_failure", "attached"):
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

    def _start(self, kind: Literal["smoke", "liveness"], *, quiet: bool = False) -> ProbeRequest:
        request = start_request(
            self.client, self.endpoint, self.opt, kind, model=self.model, t0=self.t0
        )
        if not quiet:
            self.emit("probe", f"{kind} request sent", {"kind": kind})
        return request

    def _sample_usage(self, usage: TreeSampler) -> None:
        """GPU memory per GPU where NVML works; else CPU and RSS of the server's tree."""
        pids = self.proc.pids()
        if self.gpu.available:
            used = self.gpu.sample(pids)
            if used is not None:
                data = {
                    "used_mib": used,
                    "peak_mib": self.gpu.peak_mib,
                    "per_gpu_mib": list(self.gpu.per_device_mib),
                }
                self.emit("gpu", f"{used:.0f} MiB", data)
            return
        if not pids:  # a remote server: its processes are not this host's to sample
            return
        tree = usage.sample(pids)
        self.emit(
            "usage", f"CPU {tree.cpu_percent:.0f} % · RSS {tree.rss_mib:.0f} MiB", tree.to_dict()
        )

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

    def _phase(self, request: ProbeRequest | None) -> str:
        """The phase to blame: decode once a request has streamed a token."""
        failed_or_running = request is not None and (
            request.result is None or not request.result.ok
        )
        if request is not None and failed_or_running and request.progress.tokens > 0:
            return "decode"
        return self.timeline.phase
