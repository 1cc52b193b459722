"""GPU memory of a remote host, from its ``nvidia-smi`` over a second SSH connection.

This host's NVML cannot see the remote GPUs, so for a launch ``--on`` the telemetry runs
``nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits`` there: once at
start (the memory in use before launch, and whether nvidia-smi is there at all), then in its
own loop mode (``-lms``) on a second connection whose lines a reader thread keeps, so a
sample never waits on the network. The remote pids are not matched (the agent's pids are
the remote host's), so the run's memory is the rise of device memory since launch, as in a
container (see :mod:`servedoctor.launch.telemetry`). After teardown
:meth:`~servedoctor.launch.telemetry.GpuTelemetry.confirm_released` reads the same stream.

Where nvidia-smi is absent or fails, the run's warnings say so in one line and nothing is
sampled. ``SERVEDOCTOR_REMOTE_NVIDIA_SMI`` names it where it is not on the remote PATH.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
from collections.abc import Sequence

from servedoctor.launch.telemetry import GpuTelemetry
from servedoctor.remote.ssh import run_remote, ssh_argv
from servedoctor.remote.url import SshTarget

__all__ = ["NVIDIA_SMI_VAR", "RemoteGpuTelemetry", "parse_query"]

NVIDIA_SMI_VAR = "SERVEDOCTOR_REMOTE_NVIDIA_SMI"
QUERY = ("--query-gpu=index,memory.used", "--format=csv,noheader,nounits")
PROBE_TIMEOUT_S = 20.0
INTERVAL_MS = 1000


def parse_query(text: str) -> list[float] | None:
    """``0, 1234\\n1, 5\\n`` → MiB used per GPU in index order; None if it is not that."""
    used: dict[int, float] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split(",")]
        try:
            used[int(parts[0])] = float(parts[1])
        except (IndexError, ValueError):
            return None
    return [used[i] for i in sorted(used)] if used else None


class RemoteGpuTelemetry(GpuTelemetry):
    """:class:`GpuTelemetry` whose device figures come from the remote ``nvidia-smi``."""

    def __init__(self, target: SshTarget, notes: list[str]) -> None:
        # NVML is never opened here: the figures are the remote host's
        self._nvml = None
        self._handles = []
        self.target = target
        self._smi = os.environ.get(NVIDIA_SMI_VAR) or "nvidia-smi"
        self._latest: list[float] = []
        self._lock = threading.Lock()
        self._stream: subprocess.Popen[str] | None = None
        first = self._probe()
        if first is None:
            notes.append(self.why or f"no GPU telemetry from {target.destination}")
        else:
            self._latest = first
            self._handles = list(range(len(first)))
            self._start_stream()
        self.before_per_device = list(self._latest)
        self.before_mib = sum(self.before_per_device)
        self.peak_mib = 0.0
        self.per_device_mib = []

    why: str | None = None

    def _probe(self) -> list[float] | None:
        host = self.target.destination
        try:
            done = run_remote(self.target, [self._smi, *QUERY], timeout=PROBE_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            self.why = f"cannot ask {host} for GPU telemetry: {exc}"
            return None
        if done.returncode == 127:
            self.why = f"{self._smi} not found on {host}: no GPU telemetry from it"
            return None
        parsed = parse_query(done.stdout) if done.returncode == 0 else None
        if parsed is None:
            said = (done.stderr or done.stdout).strip().splitlines()
            first = said[0][:160] if said else f"exit {done.returncode}"
            self.why = f"{self._smi} on {host} gave no GPU figures ({first}): no GPU telemetry"
        return parsed

    def _start_stream(self) -> None:
        argv = ssh_argv(self.target, [self._smi, *QUERY, f"-lms={INTERVAL_MS}"])
        with contextlib.suppress(OSError):
            self._stream = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                start_new_session=True,
            )
            threading.Thread(target=self._read, name="remote-nvidia-smi", daemon=True).start()

    def _read(self) -> None:
        """One line per GPU per tick; a tick is complete when index 0 comes round again."""
        assert self._stream is not None and self._stream.stdout is not None
        tick: list[str] = []
        for line in self._stream.stdout:
            if line.split(",", 1)[0].strip() == "0" and tick:
                self._take(tick)
                tick = []
            tick.append(line)
            if len(tick) == len(self._handles):
                self._take(tick)
                tick = []

    def _take(self, lines: Sequence[str]) -> None:
        parsed = parse_query("".join(lines))
        if parsed is not None and len(parsed) == len(self._handles):
            with self._lock:
                self._latest = parsed

    @property
    def available(self) -> bool:
        return bool(self._handles)

    def _used_per_device(self) -> list[float]:
        with self._lock:
            return list(self._latest)

    def run_per_device(self, pids: object) -> list[float]:
        """The rise of each remote GPU's memory since launch (remote pids are not ours)."""
        now = self._used_per_device()
        return [max(0.0, u - b) for u, b in zip(now, self.before_per_device, strict=False)]

    def close(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None and stream.poll() is None:
            stream.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                stream.wait(timeout=5)
            if stream.poll() is None:
                stream.kill()
