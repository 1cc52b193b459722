"""The supervised launch (``servedoctor.launch.launch``) as a :class:`Launcher` for trials.

Every trial runs through the same supervisor as ``servedoctor launch``: its own process
group, phase timeline, smoke test, teardown and diagnosis. The launch options (prompt,
max tokens, timeouts, ``--expect``) pass through unchanged to every trial. Given a
``display`` factory, each trial runs inside a fresh live display (``launch``'s panel).
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from servedoctor.experiments.trial import Launcher, LaunchReport

if TYPE_CHECKING:
    from servedoctor.launch.runstate import EventSink

__all__ = ["DisplayFactory", "TrialLaunchOptions", "supervised_launcher"]

#: Makes the live display of one trial: a context manager that is also the event sink.
DisplayFactory = Callable[[], AbstractContextManager["EventSink"]]


@dataclass(frozen=True)
class TrialLaunchOptions:
    prompt: str = "Say hello in one sentence."
    max_tokens: int = 16
    request_timeout: float = 60.0
    expect: str | None = None
    startup_timeout: float | None = None
    runs_dir: Path = Path("runs")

    def to_dict(self) -> dict[str, Any]:
        return {
            "prompt": self.prompt,
            "max_tokens": self.max_tokens,
            "request_timeout": self.request_timeout,
            "expect": self.expect,
            "startup_timeout": self.startup_timeout,
            "runs_dir": str(self.runs_dir),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrialLaunchOptions:
        return cls(
            prompt=str(data.get("prompt", cls.prompt)),
            max_tokens=int(data.get("max_tokens", cls.max_tokens)),
            request_timeout=float(data.get("request_timeout", cls.request_timeout)),
            expect=data.get("expect"),
            startup_timeout=data.get("startup_timeout"),
            runs_dir=Path(data.get("runs_dir", "runs")),
        )


def supervised_launcher(
    options: TrialLaunchOptions, *, display: DisplayFactory | None = None
) -> Launcher:
    from servedoctor.launch import LaunchOptions, launch

    def run(argv: Sequence[str], env: Mapping[str, str]) -> LaunchReport:
        opts = LaunchOptions(
            prompt=options.prompt,
            max_tokens=options.max_tokens,
            request_timeout=options.request_timeout,
            expect=options.expect,
            startup_timeout=options.startup_timeout,
            runs_dir=options.runs_dir,
            env=dict(env),
            quiet=True,
        )
        if display is None:
            result = launch(list(argv), opts)
        else:
            with display() as sink:
                result = launch(list(argv), opts, on_event=sink)
        return LaunchReport(
            outcome=result.outcome,
            diagnosis=result.diagnosis,
            duration_s=float(result.duration_s),
            gpu_peak_mib=result.gpu_peak_mib,
            exit_code=result.exit_code,
            run_dir=str(result.run_dir),
            placement=placement(argv, env),
        )

    return run


def placement(argv: Sequence[str], env: Mapping[str, str]) -> dict[str, Any]:
    """Where a trial runs: this host, the port its command names, the GPUs it may see."""
    from servedoctor.engines import engine_for_command
    from servedoctor.launch.endpoint import endpoint_for

    gpus = env.get("CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES"))
    where: dict[str, Any] = {"host": socket.gethostname(), "gpus": gpus}
    with contextlib.suppress(Exception):  # a courtesy record: never fail a trial over it
        where["port"] = endpoint_for(engine_for_command(list(argv)), argv).port
    return where
