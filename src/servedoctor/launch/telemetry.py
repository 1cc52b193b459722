"""GPU memory of the run's processes through NVML; silently absent where NVML is not.

Counts the memory NVML lists for the run's pids. Inside a container NVML may list host pids
that match none of ours; then the rise of device memory over the figure before launch
stands in for it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable
from typing import Any

from servedoctor.launch.types import GpuReport

_MIB = 1024 * 1024


class GpuTelemetry:
    """Samples GPU memory; ``available`` is False on a machine without a working NVML."""

    def __init__(self) -> None:
        self._nvml: Any = None
        self._handles: list[Any] = []
        try:
            import pynvml

            pynvml.nvmlInit()
            count = pynvml.nvmlDeviceGetCount()
            self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
            self._nvml = pynvml
        except Exception:  # no driver, no library, no device: telemetry is simply absent
            self._nvml = None
        self.before_per_device = self._used_per_device() if self.available else []
        self.before_mib = sum(self.before_per_device)
        self.peak_mib = 0.0
        self.per_device_mib: list[float] = []  # the last sample, one figure per GPU

    @property
    def available(self) -> bool:
        return self._nvml is not None and bool(self._handles)

    def _used_per_device(self) -> list[float]:
        used: list[float] = []
        for handle in self._handles:
            try:
                used.append(self._nvml.nvmlDeviceGetMemoryInfo(handle).used / _MIB)
            except Exception:
                used.append(0.0)
        return used

    def device_used_mib(self) -> float:
        return sum(self._used_per_device())

    def run_per_device(self, pids: Iterable[int]) -> list[float]:
        """Per GPU: memory held by the given pids (by NVML's process list), or, where NVML
        lists none of them (a container), the rise of device memory since launch."""
        wanted = set(pids)
        held = [0.0] * len(self._handles)
        matched = False
        for i, handle in enumerate(self._handles):
            for getter in (
                "nvmlDeviceGetComputeRunningProcesses",
                "nvmlDeviceGetGraphicsRunningProcesses",
            ):
                try:
                    procs = getattr(self._nvml, getter)(handle)
                except Exception:
                    continue
                for proc in procs:
                    if proc.pid in wanted and proc.usedGpuMemory is not None:
                        held[i] += proc.usedGpuMemory / _MIB
                        matched = True
        if matched:
            return held
        now = self._used_per_device()
        return [max(0.0, u - b) for u, b in zip(now, self.before_per_device, strict=False)]

    def run_mib(self, pids: Iterable[int]) -> float:
        """Memory held by the given pids on all GPUs (see :meth:`run_per_device`)."""
        return sum(self.run_per_device(pids))

    def sample(self, pids: Iterable[int]) -> float | None:
        if not self.available:
            return None
        self.per_device_mib = self.run_per_device(pids)
        now = sum(self.per_device_mib)
        self.peak_mib = max(self.peak_mib, now)
        return now

    def confirm_released(
        self,
        pids: Iterable[int],
        *,
        timeout: float = 10.0,
        slack_mib: float = 64.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> GpuReport | None:
        """After teardown: wait until the run's memory is back; report before/after/peak."""
        if not self.available:
            return None
        pid_set = set(pids)
        deadline = time.monotonic() + timeout
        after = self.device_used_mib()
        released = False
        while True:
            held = self.run_mib(pid_set)
            after = self.device_used_mib()
            if held <= slack_mib and after <= self.before_mib + slack_mib:
                released = True
                break
            if time.monotonic() >= deadline:
                break
            sleep(0.25)
        return GpuReport(self.peak_mib, self.before_mib, after, released, len(self._handles))

    def close(self) -> None:
        if self._nvml is not None:
            with contextlib.suppress(Exception):
                self._nvml.nvmlShutdown()
