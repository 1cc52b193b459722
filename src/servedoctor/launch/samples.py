"""Telemetry over time: one JSON line per second in the run folder's ``telemetry.jsonl``.

Each sample holds the seconds since launch (the clock of the phase spans), the resident
memory and CPU of the server's process tree (psutil) and, where NVML works, the memory in
use on each GPU. A background thread records them while the server runs, so a quiet phase
(weights loading with no log line) still has its samples; the report draws them.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

__all__ = ["TELEMETRY_NAME", "Sample", "SampleRecorder", "read_samples"]

TELEMETRY_NAME = "telemetry.jsonl"
_MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Sample:
    t: float  # seconds since launch
    rss_mib: float  # resident memory of the server's process tree
    cpu_pct: float  # CPU of the tree (100 = one core)
    gpu_mib: tuple[float, ...] = ()  # memory in use per GPU (device-wide, NVML)

    def to_dict(self) -> dict[str, Any]:
        return {
            "t": round(self.t, 3),
            "rss_mib": round(self.rss_mib, 1),
            "cpu_pct": round(self.cpu_pct, 1),
            "gpu_mib": [round(g, 1) for g in self.gpu_mib],
        }


class _Nvml:
    """Per-device memory in use; empty where NVML does not work."""

    def __init__(self) -> None:
        self._nvml: Any = None
        self._handles: list[Any] = []
        try:
            import pynvml

            pynvml.nvmlInit()
            self._handles = [
                pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())
            ]
            self._nvml = pynvml
        except Exception:  # no driver, no library, no device
            self._nvml = None

    def used_mib(self) -> tuple[float, ...]:
        if self._nvml is None:
            return ()
        used = []
        for handle in self._handles:
            try:
                used.append(self._nvml.nvmlDeviceGetMemoryInfo(handle).used / _MIB)
            except Exception:
                used.append(0.0)
        return tuple(used)

    def close(self) -> None:
        if self._nvml is not None:
            with contextlib.suppress(Exception):
                self._nvml.nvmlShutdown()


class SampleRecorder(threading.Thread):
    """Samples the tree under ``pid`` every ``interval_s`` into ``run_dir/telemetry.jsonl``."""

    def __init__(self, run_dir: Path, pid: int, *, t0: float, interval_s: float = 1.0) -> None:
        super().__init__(name="servedoctor-samples", daemon=True)
        self._path = run_dir / TELEMETRY_NAME
        self._pid = pid
        self._t0 = t0
        self._interval = interval_s
        self._halt = threading.Event()
        self._procs: dict[int, psutil.Process] = {}
        self.count = 0

    @classmethod
    def begin(cls, run_dir: Path, pid: int, *, t0: float) -> SampleRecorder:
        recorder = cls(run_dir, pid, t0=t0)
        recorder.start()
        return recorder

    def stop(self) -> None:
        self._halt.set()
        if self.is_alive():
            self.join(timeout=2.0)

    def _tree(self) -> list[psutil.Process]:
        try:
            root = self._procs.get(self._pid) or psutil.Process(self._pid)
            found = [root, *root.children(recursive=True)]
        except psutil.Error:
            return []
        # keep each Process object: cpu_percent() measures since the previous call on it
        self._procs = {p.pid: self._procs.get(p.pid, p) for p in found}
        return list(self._procs.values())

    def sample(self, nvml: _Nvml) -> Sample | None:
        procs = self._tree()
        if not procs:
            return None
        rss = cpu = 0.0
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                rss += proc.memory_info().rss / _MIB
                cpu += proc.cpu_percent(None)
        return Sample(time.monotonic() - self._t0, rss, cpu, nvml.used_mib())

    def run(self) -> None:
        nvml = _Nvml()
        try:
            with self._path.open("a", encoding="utf-8") as out:
                while True:
                    sample = self.sample(nvml)
                    if sample is not None:
                        out.write(json.dumps(sample.to_dict()) + "\n")
                        out.flush()
                        self.count += 1
                    if self._halt.wait(self._interval):
                        break
        except OSError:
            pass  # a full disk: the log matters more than the samples
        finally:
            nvml.close()


def _sample(d: Any) -> Sample | None:
    try:
        gpus = tuple(float(g) for g in d.get("gpu_mib") or ())
        return Sample(float(d["t"]), float(d["rss_mib"]), float(d["cpu_pct"]), gpus)
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def read_samples(path: Path) -> Iterator[Sample]:
    """The samples of a telemetry file; lines that are not samples are skipped."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return
    try:  # one parse for the whole file (10,000 samples: ~5x faster than line by line)
        rows = json.loads("[" + ",".join(line for line in lines if line.strip()) + "]")
    except ValueError:  # a torn or foreign line: parse line by line, skip the bad ones
        rows = []
        for line in lines:
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue
    for row in rows:
        sample = _sample(row)
        if sample is not None:
            yield sample
