"""The supervised launch (``servedoctor.launch.launch``) as a :class:`Launcher` for trials.

Every trial runs through the same supervisor as ``servedoctor launch``: its own process
group, phase timeline, smoke test, teardown and diagnosis. The launch options (prompt,
max tokens, timeouts, ``--expect``) pass through unchanged to every trial. Given a
``display`` factory, each trial runs inside a fresh live display (``launch``'s panel).
With ``on`` (``fix --on ssh://…``), every trial is a remote launch through the same
transport as ``launch --on``, and its placement names that host.
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

from servedoctor.errors import UserError
from servedoctor.experiments.trial import Launcher, LaunchReport
from servedoctor.remote.url import SshTarget, parse_target

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
    on: SshTarget | None = None  # every trial runs on this remote host (``fix --on``)

    def to_dict(self) -> dict[str, Any]:
        return {
            "prompt": self.prompt,
            "max_tokens": self.max_tokens,
            "request_timeout": self.request_timeout,
            "expect": self.expect,
            "startup_timeout": self.startup_timeout,
            "runs_dir": str(self.runs_dir),
            "on": self.on.url if self.on is not None else None,
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
            on=parse_target(str(data["on"])) if data.get("on") else None,
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
            on=options.on,
        )
        if display is None:
            result = launch(list(argv), opts)
        else:
            with display() as sink:
                result = launch(list(argv), opts, on_event=sink)
        if options.on is not None and _not_found_remotely(result.exit_code, result.log_path):
            raise UserError(f"{argv[0]}: no such command on {options.on.url}")
        return LaunchReport(
            outcome=result.outcome,
            diagnosis=result.diagnosis,
            duration_s=float(result.duration_s),
            gpu_peak_mib=result.gpu_peak_mib,
            exit_code=result.exit_code,
            run_dir=str(result.run_dir),
            placement=placement(argv, env, on=options.on),
        )

    return run


def _not_found_remotely(exit_code: int | None, log: Path) -> bool:
    """Did the remote agent fail to start the command at all (exit 127, its own line)?

    A change never touches the program, so this is a usage error, not a trial."""
    if exit_code != 127:
        return False
    try:
        head = log.read_text(errors="replace")[:4000]
    except OSError:
        return False
    return "servedoctor: cannot start " in head


def placement(
    argv: Sequence[str], env: Mapping[str, str], *, on: SshTarget | None = None
) -> dict[str, Any]:
    """Where a trial runs: this host (or the ``--on`` host, and its ``ssh://`` URL), the
    port its command names, the GPUs it may see."""
    from servedoctor.engines import engine_for_command
    from servedoctor.launch.endpoint import endpoint_for

    where: dict[str, Any]
    if on is None:
        gpus = env.get("CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES"))
        where = {"host": socket.gethostname(), "gpus": gpus}
    else:  # this host's CUDA_VISIBLE_DEVICES says nothing about the remote one
        where = {"host": on.destination, "on": on.url, "gpus": env.get("CUDA_VISIBLE_DEVICES")}
    with contextlib.suppress(Exception):  # a courtesy record: never fail a trial over it
        where["port"] = endpoint_for(engine_for_command(list(argv)), argv).port
    return where
