"""``fix --parallel``'s planner side: trials launched ahead, results read in queue order.

The batch launcher here runs each batch on threads and finishes the jobs in *reverse*
order (the last one given returns first); the planner's verdict, its trials and their
order must equal the sequential session's, and batches of two or more must really happen.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence

import pytest
from fakeworld import FakeWorld, Fault, diag, flag_is
from hypothesis import given, settings
from hypothesis import strategies as st

from servedoctor.experiments.command import parse
from servedoctor.experiments.ddmin import ddmin
from servedoctor.experiments.planner import FixResult, Planner
from servedoctor.experiments.runner import TrialRunner
from servedoctor.experiments.trial import LaunchReport
from servedoctor.model import REMOVE, Change

CMD = [
    "python", "-m", "sglang.launch_server", "--model-path", "/m",
    "--attention-backend", "flashinfer", "--tp-size", "2", "--enable-torch-compile",
    "--kv-cache-dtype", "fp8_e5m2", "--cuda-graph-max-bs", "256",
]  # fmt: skip
TRITON = Change("flag", "--attention-backend", "triton")
KV = Change("flag", "--kv-cache-dtype", "auto")


class ReversedBatch:
    """Runs a batch side by side on threads; the later a job is given, the sooner it ends."""

    def __init__(self, world: FakeWorld, width: int) -> None:
        self.world = world
        self.width = width
        self.batches: list[int] = []
        self.finished: list[int] = []  # job positions in the order they ended

    def run_all(
        self, jobs: Sequence[tuple[Sequence[str], Mapping[str, str]]]
    ) -> list[LaunchReport]:
        assert len(jobs) <= self.width
        self.batches.append(len(jobs))
        reports: list[LaunchReport | None] = [None] * len(jobs)
        lock = threading.Lock()

        def one(i: int) -> None:
            time.sleep(0.01 * (len(jobs) - i))
            report = self.world(*jobs[i])
            with lock:
                reports[i] = report
                self.finished.append(i)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(len(jobs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return [r for r in reports if r is not None]


def scenarios() -> dict[str, list[Fault]]:
    return {
        "one rule change": [
            Fault(flag_is("--attention-backend", "flashinfer"),
                  diag("arch_unsupported", "load", (TRITON, 0.8))),
        ],
        "an unknown bad flag": [
            Fault(flag_is("--enable-torch-compile"), diag("other", "graph_capture")),
        ],
        "two faults chained": [
            Fault(flag_is("--attention-backend", "flashinfer"),
                  diag("arch_unsupported", "load", (TRITON, 0.8))),
            Fault(flag_is("--kv-cache-dtype", "fp8_e5m2"),
                  diag("device_assert", "prefill", (KV, 0.7))),
        ],
        "two independent faults (combine, ddmin)": [
            Fault(lambda a, e: "--enable-torch-compile" in a and "--cuda-graph-max-bs" in a,
                  diag("other", "graph_capture", text="compile and graphs")),
            Fault(lambda a, e: "--enable-torch-compile" in a,
                  diag("other", "warmup", text="compile alone")),
            Fault(lambda a, e: "--cuda-graph-max-bs" in a,
                  diag("other", "decode", text="graphs alone")),
        ],
        "never fixed": [Fault(lambda a, e: True, diag("oom", "load"))],
    }  # fmt: skip


def _session(
    faults: list[Fault], width: int, max_trials: int = 12
) -> tuple[FixResult, TrialRunner, ReversedBatch]:
    world = FakeWorld(faults)
    batch = ReversedBatch(world, width) if width > 1 else None
    cmd = parse(CMD)
    runner = TrialRunner(cmd, world, batch=batch)
    result = Planner(cmd, runner, max_trials=max_trials).run()
    return result, runner, batch or ReversedBatch(world, 1)


def _verdict(result: FixResult) -> object:
    return (
        result.outcome,
        result.changes,
        result.reason,
        result.trials_to_healthy,
        [(t.index, t.role, t.changes, t.tested, t.outcome, t.against) for t in result.trials],
    )


@pytest.mark.parametrize("name", list(scenarios()))
@pytest.mark.parametrize("width", [2, 3])
def test_parallel_verdict_equals_the_sequential_one(name: str, width: int) -> None:
    sequential, _, _ = _session(scenarios()[name], 1)
    parallel, runner, batch = _session(scenarios()[name], width)
    assert _verdict(parallel) == _verdict(sequential)
    if name != "one rule change":  # a search of more than one candidate ran some side by side
        assert max(batch.batches) >= 2
        assert batch.finished != sorted(batch.finished)  # they really ended out of order
    # what ran ahead and was never asked for is not a trial
    assert runner.launched == sum(1 for t in parallel.trials if not t.replayed) + runner.unused


def test_launching_ahead_stays_inside_max_trials() -> None:
    faults = scenarios()["never fixed"]
    sequential, _, _ = _session(faults, 1, max_trials=3)
    parallel, runner, _ = _session(faults, 3, max_trials=3)
    assert _verdict(parallel) == _verdict(sequential)
    assert sequential.reason == "reached --max-trials 3"
    assert runner.launched <= 1 + 3  # the baseline and at most the budget


def test_the_unknown_bad_flag_is_found_by_drops_run_side_by_side() -> None:
    result, _, batch = _session(scenarios()["an unknown bad flag"], 2)
    assert result.changes == (Change("flag", "--enable-torch-compile", REMOVE),)
    assert batch.batches and all(n <= 2 for n in batch.batches)


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(min_value=2, max_value=9),
    needed=st.sets(st.integers(min_value=0, max_value=8), min_size=1, max_size=4),
)
def test_ddmin_told_ahead_returns_the_same_set(n: int, needed: set[int]) -> None:
    items = list(range(n))
    need = {i for i in needed if i < n} or {0}
    told: list[list[list[int]]] = []

    def works(subset: list[int]) -> bool:
        return need <= set(subset)

    assert ddmin(items, works, ahead=told.append) == ddmin(items, works)
    # what it was told ahead is what it then tested, never an already tested subset
    flat = [frozenset(s) for batch in told for s in batch]
    assert len(flat) == len(set(flat))


class CrowdedBatch(ReversedBatch):
    """Side by side, the first job of each batch is OOM-killed (SIGKILL), as a server that
    sizes its cache to the free memory is next to another one; alone it runs as usual."""

    def run_all(
        self, jobs: Sequence[tuple[Sequence[str], Mapping[str, str]]]
    ) -> list[LaunchReport]:
        reports = super().run_all(jobs)
        killed = LaunchReport("failed", diag("other", "serving"), 40.0, exit_code=-9)
        return [killed, *reports[1:]]


def test_a_trial_killed_side_by_side_is_run_again_alone() -> None:
    faults = scenarios()["two faults chained"]
    sequential, _, _ = _session(faults, 1)
    world = FakeWorld(faults)
    cmd = parse(CMD)
    runner = TrialRunner(cmd, world, batch=CrowdedBatch(world, 2))
    parallel = Planner(cmd, runner).run()
    assert _verdict(parallel) == _verdict(sequential)
    assert runner.relaunched >= 1
    assert all(t.exit_code != -9 for t in parallel.trials)
