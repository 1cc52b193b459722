"""The values the log layer produces: :class:`Event` and the :class:`Frame` of a stack."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

EventKind = Literal[
    "phase",
    "traceback",
    "stack",
    "exception",
    "kernel_assert",
    "cuda_error",
    "oom",
    "nccl",
    "fatal",
    "override",
    "selection",  # the library the server chose for a job (signals.yaml; name: the job)
    "version_warning",
    "warning",
    "config",
    "notable",
    "jit",
    "tail",
    "process",  # a process name a line prefix gave (vLLM's "(EngineCore_DP0 pid=…)")
    "format",  # a line format the log is written in (prefixes.yaml: vLLM's logger, llama.cpp's)
]


@dataclass(frozen=True, slots=True)
class Frame:
    file: str
    line: int | None
    func: str
    code: str = ""
    at: int = 0

    def render(self) -> str:
        return f'File "{self.file}", line {self.line}, in {self.func}'


@dataclass(frozen=True, slots=True)
class Event:
    kind: EventKind
    line: int
    text: str
    end_line: int = 0
    rank: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    frames: tuple[Frame, ...] = ()
    count: int = 1

    @property
    def last_line(self) -> int:
        return max(self.line, self.end_line)


# --- patterns -------------------------------------------------------------------------
