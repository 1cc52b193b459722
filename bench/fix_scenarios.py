"""Scenario benchmark for `servedoctor fix`: mean trials to a healthy config, vs two baselines.

Each scenario is an SGLang-like command with 6-10 settings of which 1-3 are faulty. A
stand-in server (bench/standin_server.py) replays the real corpus log of a fault whose
trigger settings it is given, and prints a healthy SGLang start otherwise. The bench drives
the real planner through the real trial runner with a launcher that runs the stand-in as a
subprocess, writes its output to a run directory and diagnoses it with the real
`servedoctor.diagnose` (the stand-in does not serve HTTP, so the supervisor is not used).

Methods, on the same scenarios in the same run:
- planner: servedoctor's planner (candidates from the diagnosis, one change per trial);
- one-at-a-time: the same suspected changes, tried one at a time in a seeded random order
  (a change that moves the failure is kept, as the planner does);
- all-then-revert: every suspected change at once, then reverted one by one.
"Trials" are launches after the first (baseline) launch, up to and including the first
healthy one. Totals add what each method does after that (planner: the confirmation re-run
and ddmin; all-then-revert: the remaining reverts).

Usage: python bench/fix_scenarios.py [--corpus DIR] [--seed N] [--scenarios N] [--verbose]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from servedoctor.diagnose import diagnose_path
from servedoctor.experiments.candidates import build_candidates
from servedoctor.experiments.command import parse
from servedoctor.experiments.planner import Planner
from servedoctor.experiments.runner import TrialRunner
from servedoctor.experiments.trial import LaunchReport, merge_change
from servedoctor.model import Change
from servedoctor.taxonomy import PHASE_ORDER

HERE = Path(__file__).resolve().parent
STANDIN = HERE / "standin_server.py"
READY = "The server is fired up and ready to roll"
#: Nominal seconds a run takes to reach a phase (the stand-in itself returns at once).
PHASE_SECONDS = {"install": 20, "startup": 30, "load": 60, "memory_setup": 90,
                 "graph_capture": 120, "warmup": 150, "prefill": 170, "decode": 170,
                 "serving": 170, "shutdown": 10}  # fmt: skip
HEALTHY_SECONDS = 180.0
MAX_TRIALS = 25


@dataclass
class Scenario:
    id: str
    settings: list[tuple[str, str]]
    env: dict[str, str]
    faults: list[dict[str, Any]]
    requires: list[dict[str, Any]]

    def argv(self) -> list[str]:
        out = [f"{k}={v}" for k, v in self.env.items()]
        out += [sys.executable, str(STANDIN)]
        for name, value in self.settings:
            out += [name] if value == "" else [name, value]
        return out


@dataclass
class Launcher:
    """Runs the stand-in as a subprocess and diagnoses what it printed."""

    scenario_file: Path
    runs: Path
    launches: int = 0
    seconds: float = 0.0
    log: list[str] = field(default_factory=list)

    def __call__(self, argv: Sequence[str], env: Mapping[str, str]) -> LaunchReport:
        self.launches += 1
        run_dir = self.runs / f"run{self.launches:04d}"
        run_dir.mkdir(parents=True)
        proc = subprocess.run(
            list(argv),
            env={"PATH": "/usr/bin:/bin", **env, "STANDIN_SCENARIO": str(self.scenario_file)},
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        log = run_dir / "server.log"
        log.write_text(proc.stdout + proc.stderr, encoding="utf-8")
        if proc.returncode == 0 and READY in proc.stdout:
            self.seconds += HEALTHY_SECONDS
            return LaunchReport("healthy", None, HEALTHY_SECONDS, exit_code=0, run_dir=str(run_dir))
        # as launch does: the engine is the command's (the stand-in runs SGLang's command
        # line), whatever server wrote the replayed log
        diagnosis = diagnose_path(log, engine="sglang", command_flags=command_flags(argv, env))
        took = float(PHASE_SECONDS.get(diagnosis.phase or "", 60))
        self.seconds += took
        return LaunchReport("failed", diagnosis, took, exit_code=proc.returncode,
                            run_dir=str(run_dir))  # fmt: skip


def command_flags(argv: Sequence[str], env: Mapping[str, str]) -> dict[str, str | None]:
    """The settings in effect, as the diagnosis engine takes them (fills rule templates)."""
    out: dict[str, str | None] = dict(env)
    for i, tok in enumerate(argv):
        if tok.startswith("--"):
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            out[tok] = nxt if nxt is not None and not nxt.startswith("--") else "true"
    return out


def phase_of(corpus: Path, case: str) -> str:
    data = yaml.safe_load((corpus / case / "case.yaml").read_text(encoding="utf-8"))
    return str(data["phase"])


def trigger_names(fault: Mapping[str, Any]) -> set[str]:
    trig = fault["trigger"]
    return set(trig.get("flags", {})) | set(trig.get("env", {}))


def make_scenarios(spec: Mapping[str, Any], corpus: Path, n: int, seed: int) -> list[Scenario]:
    """Deterministic scenarios: 1-3 compatible faults among 6-10 settings each."""
    rng = random.Random(seed)
    faults = [dict(f, phase=phase_of(corpus, f["case"])) for f in spec["faults"]]
    counts = ([1] * 16 + [2] * 6 + [3] * 2) * (n // 24 + 1)
    scenarios: list[Scenario] = []
    for i in range(n):
        k = counts[i]
        chosen: list[dict[str, Any]] = []
        names: set[str] = set()
        pool = faults[:]
        rng.shuffle(pool)
        for f in pool:
            if len(chosen) == k:
                break
            if not (trigger_names(f) & names):
                chosen.append(f)
                names |= trigger_names(f)
        settings: list[tuple[str, str]] = [("--model-path", "/models/demo"), ("--port", "30000")]
        env: dict[str, str] = {}
        for f in chosen:
            settings += [(name, value) for name, value in f["trigger"].get("flags", {}).items()]
            env.update(f["trigger"].get("env", {}))
        requires = [r for r in spec["requires"] if rng.random() < 0.4]
        settings += [(r["flag"], r["value"]) for r in requires]
        target = rng.randint(6, 10)
        harmless = [tuple(h) for h in spec["harmless"] if h[0] not in names]
        rng.shuffle(harmless)
        while len(settings) + len(env) < target and harmless:
            name, value = harmless.pop()
            settings.append((str(name), str(value)))
        scenarios.append(Scenario(f"s{i + 1:02d}", settings, env, chosen, requires))
    return scenarios


def write_scenario(s: Scenario, corpus: Path, path: Path) -> None:
    path.write_text(json.dumps({"corpus": str(corpus), "faults": s.faults,
                                "requires": s.requires}), encoding="utf-8")  # fmt: skip


# -- the three methods ------------------------------------------------------------------
@dataclass
class Outcome:
    to_healthy: int | None  # launches after the baseline up to the first healthy one
    total: int  # launches after the baseline, all told
    changes: tuple[Change, ...] = ()


def suspected(runner: TrialRunner, changes: tuple[Change, ...], trial: Any) -> list[Change]:
    """The changes the diagnosis suspects (best per setting), without probes."""
    cmd = runner.command
    for c in changes:
        cmd = cmd.apply(c)
    best: dict[tuple[str, str], Change] = {}
    for cand in build_candidates(diagnosis=trial.diagnosis, command=cmd,
                                 base_cost_s=trial.duration_s):  # fmt: skip
        key = (cand.change.kind, cand.change.name)
        if cand.runnable and not cand.is_probe and key not in best:
            best[key] = cand.change
    return list(best.values())


def run_planner(runner: TrialRunner) -> Outcome:
    result = Planner(runner.command, runner, max_trials=MAX_TRIALS).run()
    total = sum(1 for t in result.trials if t.role != "baseline")
    return Outcome(result.trials_to_healthy, total, result.changes)


def later_or_same(phase: str | None, than: str | None) -> bool:
    """The planner's rule for keeping a change that moved the failure."""
    return PHASE_ORDER.get(phase or "", -1) >= PHASE_ORDER.get(than or "", -1)


def run_one_at_a_time(runner: TrialRunner, rng: random.Random) -> Outcome:
    base = runner.run((), role="baseline", why="baseline")
    kept: tuple[Change, ...] = ()
    reference = base
    queue = suspected(runner, (), base)
    rng.shuffle(queue)
    n = 0
    while queue and n < MAX_TRIALS:
        change = queue.pop(0)
        changes = merge_change(kept, change)
        if runner.known(changes) is not None:
            continue
        n += 1
        t = runner.run(changes, role="candidate", why="random", tested=change,
                       reference=reference.signature)  # fmt: skip
        if t.healthy:
            return Outcome(n, n, changes)
        if t.outcome == "different_failure" and later_or_same(t.phase, reference.phase):
            kept, reference = changes, t
            touched = {(c.kind, c.name) for c in kept}
            extra = [c for c in suspected(runner, kept, t) if (c.kind, c.name) not in touched]
            queue = [c for c in queue if (c.kind, c.name) not in touched]
            queue += [c for c in extra if c not in queue]
            rng.shuffle(queue)
    return Outcome(None, n)


def run_all_then_revert(runner: TrialRunner) -> Outcome:
    """All suspected changes at once; then revert them one by one. Before the first healthy
    run a revert that moves the failure stays reverted (that change was harmful), one that
    does not is restored; after it, a revert that stays healthy stays (minimisation)."""
    base = runner.run((), role="baseline", why="baseline")
    current = tuple(suspected(runner, (), base))
    n, first = 1, None
    t = runner.run(current, role="combine", why="everything at once")
    if t.healthy:
        first = 1
    for change in list(current):
        if n >= MAX_TRIALS:
            break
        trial_set = tuple(c for c in current if c != change)
        if not trial_set:
            continue
        n += 1
        before = t
        r = runner.run(trial_set, role="minimise", why=f"revert {change.describe()}",
                       reference=before.signature)  # fmt: skip
        if r.healthy:
            first = first or n
            current, t = trial_set, r
        elif first is None and r.outcome == "different_failure":
            current, t = trial_set, r
    return Outcome(first, n, current if first else ())


# -- driver ----------------------------------------------------------------------------
def points_at_trigger(corpus: Path, fault: Mapping[str, Any]) -> bool:
    """Does the real diagnosis of the fault's log propose a change to its trigger?"""
    d = diagnose_path(corpus / fault["case"] / "log.txt", engine="sglang")
    names = trigger_names(fault)
    return any(c.name in names for h in d.hypotheses for c in h.changes)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=HERE.parent.parent / "shared/corpus/dev")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--scenarios", type=int, default=24)
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args(argv)
    if not args.corpus.is_dir():
        print(f"skipped: no corpus at {args.corpus} (pass --corpus DIR)")
        return 0
    spec = yaml.safe_load((HERE / "fix_scenarios.yaml").read_text(encoding="utf-8"))
    missing = [f["case"] for f in spec["faults"] if not (args.corpus / f["case"]).is_dir()]
    if missing:
        print(f"skipped: corpus lacks {', '.join(missing)}")
        return 0

    checked = {f["id"]: points_at_trigger(args.corpus, f) for f in spec["faults"]}
    print(f"faults whose real diagnosis proposes a change to the trigger setting: "
          f"{sum(checked.values())}/{len(checked)}")  # fmt: skip
    for fid, ok in checked.items():
        if not ok:
            print(f"  (no rule points at the trigger of {fid})")

    scenarios = make_scenarios(spec, args.corpus, args.scenarios, args.seed)
    rng = random.Random(args.seed)
    results: dict[str, list[Outcome]] = {"planner": [], "one-at-a-time": [], "all-then-revert": []}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for s in scenarios:
            sfile = Path(tmp) / f"{s.id}.json"
            write_scenario(s, args.corpus, sfile)
            methods: dict[str, Callable[[TrialRunner], Outcome]] = {
                "planner": run_planner,
                "one-at-a-time": lambda r: run_one_at_a_time(r, rng),
                "all-then-revert": run_all_then_revert,
            }
            row = []
            for name, method in methods.items():
                launcher = Launcher(sfile, Path(tmp) / s.id / name)
                cmd = parse(s.argv())
                outcome = method(TrialRunner(cmd, launcher))
                results[name].append(outcome)
                row.append(f"{name} {outcome.to_healthy if outcome.to_healthy else 'x'}")
            if args.verbose:
                faults = ", ".join(f["id"] for f in s.faults)
                fix = " + ".join(c.describe() for c in results["planner"][-1].changes)
                print(f"{s.id} {len(s.settings) + len(s.env):2d} settings, faults [{faults}]: "
                      f"{' | '.join(row)} | planner fix: {fix}")  # fmt: skip
    elapsed = time.perf_counter() - started

    n_faults = [len(s.faults) for s in scenarios]
    n_settings = [len(s.settings) + len(s.env) for s in scenarios]
    print(f"{len(scenarios)} scenarios, {min(n_settings)}-{max(n_settings)} settings each, "
          f"faults per scenario: mean {statistics.mean(n_faults):.2f} "
          f"({n_faults.count(1)}x1, {n_faults.count(2)}x2, {n_faults.count(3)}x3)")  # fmt: skip
    print(
        f"{'method':16s} {'fixed':>6s} {'mean trials to healthy':>23s} {'mean total trials':>18s}"
    )
    means = {}
    for name, outs in results.items():
        ok = [o.to_healthy for o in outs if o.to_healthy is not None]
        # an unfixed scenario counts as the trial budget
        to_healthy = [o.to_healthy if o.to_healthy is not None else MAX_TRIALS for o in outs]
        means[name] = statistics.mean(to_healthy)
        print(f"{name:16s} {len(ok):3d}/{len(outs):<2d} {means[name]:23.2f} "
              f"{statistics.mean(o.total for o in outs):18.2f}")  # fmt: skip
    both = [i for i in range(len(scenarios))
            if all(results[m][i].to_healthy is not None for m in results)]  # fmt: skip
    if both:
        fair = {m: statistics.mean(results[m][i].to_healthy or 0 for i in both) for m in results}
        print(
            f"on the {len(both)} scenarios every method fixed: "
            + ", ".join(f"{m} {v:.2f}" for m, v in fair.items())
        )
    p = means["planner"]
    print(
        f"ratio planner / one-at-a-time: {p / means['one-at-a-time']:.2f}; "
        f"planner / all-then-revert: {p / means['all-then-revert']:.2f}"
    )
    goal = p <= 1.5 and p < means["one-at-a-time"] and p < means["all-then-revert"]
    print(
        f"goal (mean <= 1.5 and fewer than both baselines): {'met' if goal else 'NOT met'}; "
        f"{elapsed:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
