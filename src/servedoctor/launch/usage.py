"""CPU and resident memory of the server's process tree (psutil), for the live display.

Shown where there is no GPU to watch: a CPU server's load is its CPU time and its RSS.
CPU percent is per core (200 % = two cores busy), measured between two samples, so a
process's first sample counts 0.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass

import psutil

_MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class TreeUsage:
    processes: int
    cpu_percent: float
    rss_mib: float

    def to_dict(self) -> dict[str, float | int]:
        return {
            "processes": self.processes,
            "cpu_percent": round(self.cpu_percent, 1),
            "rss_mib": round(self.rss_mib, 1),
        }


class TreeSampler:
    """Keeps one psutil handle per process so CPU percent spans the time between samples."""

    def __init__(self) -> None:
        self._procs: dict[int, psutil.Process] = {}

    def sample(self, pids: Iterable[int]) -> TreeUsage:
        wanted = set(pids)
        for pid in list(self._procs):
            if pid not in wanted:
                del self._procs[pid]
        cpu = rss = 0.0
        count = 0
        for pid in wanted:
            proc = self._procs.get(pid)
            with contextlib.suppress(psutil.Error):
                if proc is None:
                    proc = self._procs[pid] = psutil.Process(pid)
                with proc.oneshot():
                    cpu += proc.cpu_percent(interval=None)
                    rss += proc.memory_info().rss
                count += 1
        return TreeUsage(count, cpu, rss / _MIB)
