"""``fix --parallel N``: trials side by side through Ray, each on its own GPUs and port.

Ray places the trials; nothing here schedules. Each trial is one Ray task that asks for the
GPUs one server needs (``num_gpus``: the command's tensor × pipeline parallel sizes, 0 on a
cluster without GPUs), so Ray hands every running trial a disjoint
``CUDA_VISIBLE_DEVICES`` slice. The task picks a free port on its node, rewrites the
command's port flag to it, and runs the same supervised launch as a sequential trial
(:func:`~servedoctor.experiments.launching.supervised_launcher`); its report carries where
it ran (host, Ray node, GPUs, port), which the findings store keeps per trial.

The cluster is the user's (``--ray ADDRESS``; the trials are pinned to this host's node,
where the run folders and package overlays are) or a local one started for the session on
loopback and shut down after it. Reports come back in the order the jobs were given
(``ray.get`` of the list), never in the order the trials finish.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import replace
from types import TracebackType
from typing import Any

from servedoctor.engines import engine_for_command
from servedoctor.errors import UserError
from servedoctor.experiments.launching import TrialLaunchOptions, supervised_launcher
from servedoctor.experiments.trial import LaunchReport

__all__ = ["RAY_MISSING", "RayTrials", "gpus_per_trial", "with_port"]

RAY_MISSING = "fix --parallel needs Ray: pip install 'servedoctor[parallel]'"
#: Seconds the trials of a batch get to tear their servers down after Ctrl-C.
CANCEL_GRACE_S = 60.0


def with_port(argv: Sequence[str], port: int) -> list[str]:
    """``argv`` with its port flag (any spelling the engine knows) set to ``port``."""
    spec = engine_for_command(list(argv))
    if not spec.port_flags:
        raise UserError(f"fix --parallel cannot give {spec.display} its own port per trial")
    out: list[str] = []
    skip = False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
            continue
        if arg in spec.port_flags and i + 1 < len(argv):
            skip = True
            continue
        if arg.split("=", 1)[0] in spec.port_flags:
            continue
        out.append(arg)
    return [*out, spec.port_flags[0], str(port)]


def gpus_per_trial(argv: Sequence[str]) -> int:
    """GPUs one server of this command uses: tensor × pipeline parallel sizes (1 each when
    not given)."""
    from servedoctor.remote.multinode import knob_value

    total = 1
    for knob in ("tensor_parallel", "pipeline_parallel"):
        value = knob_value(argv, knob)
        try:
            total *= max(1, int(value)) if value is not None else 1
        except ValueError:
            raise UserError(f"{knob.replace('_', ' ')} size {value!r} is not a number") from None
    return total


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_trial(
    argv: Sequence[str], env: Mapping[str, str], options: TrialLaunchOptions, node: str
) -> LaunchReport | str:
    """One trial inside a Ray task: its own port, the GPUs Ray gave it. A usage error
    (the command cannot start at all) comes back as its one-line message."""
    port = _free_port()
    try:
        report = supervised_launcher(options)(with_port(argv, port), env)
    except UserError as exc:
        return str(exc)
    where = dict(report.placement or {})
    where["ray_node"] = node[:12]
    return replace(report, placement=where)


class RayTrials:
    """A Ray cluster for one fix session: a :class:`BatchLauncher` of width ``width``, and a
    one-trial :class:`Launcher` for the trials the planner runs alone."""

    def __init__(
        self,
        options: TrialLaunchOptions,
        *,
        width: int,
        address: str | None = None,
        gpus: int = 1,
    ) -> None:
        if width < 1:
            raise UserError("--parallel wants 1 or more")
        self.options = replace(options, runs_dir=options.runs_dir.resolve())
        self._width = width
        self.address = address
        self.gpus_wanted = gpus
        self.gpus = 0  # per trial, once the cluster is known
        self._ray: Any = None
        self._task: Any = None
        self._node: str = ""
        self.notes: list[str] = []  # what the session's output should say about Ray

    @property
    def width(self) -> int:
        return self._width

    @property
    def where(self) -> str:
        return self.address or "a local Ray cluster on 127.0.0.1"

    # -- the cluster --------------------------------------------------------------------
    def __enter__(self) -> RayTrials:
        try:
            import ray
        except ImportError:
            raise UserError(RAY_MISSING) from None
        self._ray = ray
        common: dict[str, Any] = {
            "include_dashboard": False,
            "log_to_driver": False,
            "configure_logging": False,
            "logging_level": logging.ERROR,
        }
        try:
            if self.address is None:
                # a server loading a model is meant to use memory: Ray's memory monitor must
                # not kill the trial's supervisor (its reaper would stop the server mid-trial)
                os.environ.setdefault("RAY_memory_monitor_refresh_ms", "0")
                ray.init(
                    address="local",
                    _node_ip_address="127.0.0.1",
                    num_cpus=max(self._width, os.cpu_count() or 1),
                    **common,
                )
            else:
                ray.init(address=self.address, **common)
        except Exception as exc:  # ConnectionError, RuntimeError, ValueError: one line
            where = self.address or "a local Ray cluster"
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise UserError(f"cannot start trials on {where}: {first}") from None
        self._node = ray.get_runtime_context().get_node_id()
        self._place()
        return self

    def _place(self) -> None:
        """GPUs per trial, checked against this node's: the trials must fit side by side."""
        ray = self._ray
        node = next((n for n in ray.nodes() if n.get("NodeID") == self._node), None)
        have = float((node or {}).get("Resources", {}).get("GPU", 0.0))
        self.gpus = self.gpus_wanted if have > 0 else 0
        if self.gpus and have < self.gpus * self._width:
            self.close()
            raise UserError(
                f"--parallel {self._width} needs {self.gpus * self._width} GPUs "
                f"({self.gpus} per trial); this host's Ray node has {have:g}"
            )
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        self._task = ray.remote(run_trial).options(
            num_cpus=1,
            num_gpus=self.gpus,
            max_retries=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(self._node, soft=False),
        )

    def close(self) -> None:
        if self._ray is not None and self._ray.is_initialized():
            self._ray.shutdown()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- launching ----------------------------------------------------------------------
    def __call__(self, argv: Sequence[str], env: Mapping[str, str]) -> LaunchReport:
        return self.run_all([(argv, env)])[0]

    def run_all(
        self, jobs: Sequence[tuple[Sequence[str], Mapping[str, str]]]
    ) -> list[LaunchReport]:
        """Run the jobs side by side; the reports in the jobs' order."""
        ray = self._ray
        if ray is None:
            raise RuntimeError("RayTrials used outside its with-block")
        refs = [
            self._task.remote(list(argv), dict(env), self.options, self._node) for argv, env in jobs
        ]
        reports: list[LaunchReport] = []
        try:
            for ref in refs:  # in the jobs' order, whatever order they finish in
                try:
                    result = ray.get(ref)
                except ray.exceptions.RayError as exc:  # the task's worker died (OOM, node)
                    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                    self.notes.append(f"a trial's Ray worker ended: {first[:200]}")
                    result = LaunchReport("interrupted", None, 0.0)
                if isinstance(result, str):
                    raise UserError(result)
                reports.append(result)
        except KeyboardInterrupt:
            for ref in refs:  # KeyboardInterrupt inside each task: its server torn down
                ray.cancel(ref, force=False)
            ray.wait(refs, num_returns=len(refs), timeout=CANCEL_GRACE_S)
            raise
        return reports
