from __future__ import annotations

from fakeworld import FakeWorld, Fault, diag, flag_is

from servedoctor.experiments.command import parse
from servedoctor.experiments.planner import PlanEvent, Planner
from servedoctor.experiments.runner import TrialRunner
from servedoctor.model import REMOVE, Change

CMD = [
    "python", "-m", "sglang.launch_server", "--model-path", "/m",
    "--attention-backend", "flashinfer", "--tp-size", "2", "--enable-torch-compile",
    "--kv-cache-dtype", "fp8_e5m2", "--cuda-graph-max-bs", "256",
]  # fmt: skip
TRITON = Change("flag", "--attention-backend", "triton")


def solve(world: FakeWorld, **kw: object) -> tuple[Planner, object]:
    cmd = parse(CMD)
    planner = Planner(cmd, TrialRunner(cmd, world), **kw)  # type: ignore[arg-type]
    return planner, planner.run()


def test_single_fault_fixed_by_the_rule_change_in_one_trial_and_confirmed() -> None:
    world = FakeWorld([Fault(flag_is("--attention-backend", "flashinfer"),
                             diag("arch_unsupported", "load", (TRITON, 0.8)))])  # fmt: skip
    _, result = solve(world)
    assert result.outcome == "fixed"  # type: ignore[attr-defined]
    assert result.changes == (TRITON,)  # type: ignore[attr-defined]
    roles = [t.role for t in result.trials]  # type: ignore[attr-defined]
    assert roles == ["baseline", "candidate", "confirm"]
    assert result.trials_to_healthy == 1  # type: ignore[attr-defined]


def test_unknown_bad_flag_found_by_dropping_flags_one_at_a_time() -> None:
    world = FakeWorld([Fault(flag_is("--enable-torch-compile"), diag("other", "graph_capture"))])
    _, result = solve(world)
    assert result.outcome == "fixed"  # type: ignore[attr-defined]
    assert result.changes == (Change("flag", "--enable-torch-compile", REMOVE),)  # type: ignore[attr-defined]
    for trial in result.trials:  # type: ignore[attr-defined]
        if trial.role == "candidate":
            assert len(trial.changes) == 1


def test_two_faults_chained_through_a_different_failure_then_minimised() -> None:
    kv = Change("flag", "--kv-cache-dtype", "auto")
    world = FakeWorld([
        Fault(flag_is("--attention-backend", "flashinfer"),
              diag("arch_unsupported", "load", (TRITON, 0.8))),
        Fault(flag_is("--kv-cache-dtype", "fp8_e5m2"),
              diag("device_assert", "prefill", (kv, 0.7))),
    ])  # fmt: skip
    _, result = solve(world)
    assert result.outcome == "fixed"  # type: ignore[attr-defined]
    assert set(result.changes) == {TRITON, kv}  # type: ignore[attr-defined]
    # every candidate trial differs from a command that already ran by exactly one change
    ran = {frozenset()}
    for trial in result.trials:  # type: ignore[attr-defined]
        if trial.role == "candidate":
            assert any(len(set(trial.changes) - prev) == 1 for prev in ran)
        ran.add(frozenset(trial.changes))


def test_async_failure_probes_first_and_its_sharper_diagnosis_adds_candidates() -> None:
    fix = Change("flag", "--cuda-graph-max-bs", "64")
    blurred = diag("illegal_memory_access", "decode")
    sharp = diag("illegal_memory_access", "decode", (fix, 0.9))

    def sync(argv: object, env: dict[str, str]) -> bool:  # type: ignore[type-arg]
        return env.get("CUDA_LAUNCH_BLOCKING") == "1"

    world = FakeWorld([
        Fault(lambda a, e: "--cuda-graph-max-bs" in a and a[a.index("--cuda-graph-max-bs") + 1]
              == "256" and sync(a, dict(e)), sharp),
        Fault(lambda a, e: "--cuda-graph-max-bs" in a and a[a.index("--cuda-graph-max-bs") + 1]
              == "256", blurred),
    ])  # fmt: skip
    _, result = solve(world)
    trials = result.trials  # type: ignore[attr-defined]
    assert trials[1].tested == Change("env", "CUDA_LAUNCH_BLOCKING", "1")
    assert trials[2].tested == fix and trials[2].healthy
    assert result.changes == (fix,)  # type: ignore[attr-defined]


def test_needs_two_changes_that_each_alone_fail_the_same_way_found_by_combination() -> None:
    # Both flags must go; dropping either alone changes the failure; ddmin keeps both.
    a = Change("flag", "--attention-backend", REMOVE)
    b = Change("flag", "--enable-torch-compile", REMOVE)
    world = FakeWorld([
        Fault(lambda argv, env: "--attention-backend" in argv and "--enable-torch-compile" in argv,
              diag("nccl_error", "startup")),
        Fault(lambda argv, env: "--attention-backend" in argv, diag("hang", "startup")),
        Fault(lambda argv, env: "--enable-torch-compile" in argv, diag("triton_error", "startup")),
    ])  # fmt: skip
    _, result = solve(world)
    assert result.outcome == "fixed"  # type: ignore[attr-defined]
    assert set(result.changes) == {a, b}  # type: ignore[attr-defined]


def test_max_trials_stops_and_reports_not_fixed() -> None:
    world = FakeWorld([Fault(lambda argv, env: True, diag("other", "load"))])
    _, result = solve(world, max_trials=2)
    assert result.outcome == "not_fixed"  # type: ignore[attr-defined]
    assert "max-trials" in result.reason  # type: ignore[attr-defined]
    assert len(world.calls) == 3


def test_events_report_candidates_left_and_flaky_health_is_not_a_fix() -> None:
    events: list[PlanEvent] = []
    seen = {"n": 0}

    def flaky(argv: object, env: object) -> bool:
        seen["n"] += 1
        return seen["n"] != 2  # the second launch (first candidate) is healthy once

    world = FakeWorld([Fault(flaky, diag("hang", "serving", (TRITON, 0.9)))])  # type: ignore[arg-type]
    _, result = solve(world, on_event=events.append, max_trials=3)
    assert result.outcome == "not_fixed"  # type: ignore[attr-defined]
    assert [t.role for t in result.trials][:3] == ["baseline", "candidate", "confirm"]  # type: ignore[attr-defined]
    assert events[0].kind == "start" and events[1].kind == "done"
    assert events[-1].left < events[2].left + 1


def test_resume_replays_stored_trials_without_relaunching() -> None:
    world = FakeWorld([Fault(flag_is("--enable-torch-compile"), diag("other", "graph_capture"))])
    cmd = parse(CMD)
    first = Planner(cmd, TrialRunner(cmd, world), max_trials=2).run()
    assert first.outcome == "not_fixed"
    launched = len(world.calls)
    runner = TrialRunner(cmd, world, stored=first.trials)
    second = Planner(cmd, runner).run()
    assert second.outcome == "fixed"
    assert runner.launched == len(world.calls) - launched
    assert [t.replayed for t in second.trials][:3] == [True, True, True]


def test_a_spelling_the_server_refuses_is_not_its_failure_and_the_next_spelling_follows() -> None:
    from dataclasses import replace

    new = Change("flag", "--cuda-graph-backend-decode", "disabled")
    old = Change("flag", "--disable-cuda-graph")
    refused = replace(diag("other", "startup", text="error: unrecognized arguments"),
                      rules=("ARGS001",))  # fmt: skip
    world = FakeWorld([
        Fault(flag_is("--cuda-graph-backend-decode"), refused),
        Fault(lambda argv, env: "--disable-cuda-graph" not in argv,
              diag("other", "decode", (new, 0.9))),
    ])  # fmt: skip
    _, result = solve(world, max_trials=2)
    assert result.outcome == "fixed"  # type: ignore[attr-defined]
    assert result.changes == (old,)  # type: ignore[attr-defined]
    outcomes = [t.outcome for t in result.trials]  # type: ignore[attr-defined]
    assert "rejected" in outcomes
    # two trials allowed: the refused spelling did not use one up
    assert outcomes.count("rejected") == 1 and outcomes[-1] == "healthy"
