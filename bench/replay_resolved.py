"""Replay benchmark: does ``fix`` reach a working server on real failures resolved in public?

Each case whose thread confirms one flag or environment variable (``fix:`` in case.yaml) is
replayed: a stand-in (bench/standin_resolved.py) started under the engine's own command line
prints the case's real log until the confirmed change is applied, and refuses flags its
release does not have. servedoctor's real planner, trial runner and diagnosis drive it, one
change per trial, as ``servedoctor fix`` does. Reported per servedoctor tree, in the same
run: the share of cases fixed within 6 trials, the mean trials to the fix, and the spellings
the server refused.

Usage: python bench/replay_resolved.py [--baseline-src DIR] CORPUS...
(``--worker SRC`` is the per-tree process this script starts; not for direct use.)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
STANDIN = HERE / "standin_resolved.py"
MAX_TRIALS = 6
BASE = {
    "sglang": ["sglang.launch_server", "--model-path", "/m"],
    "vllm": ["vllm", "serve", "/m"],
    "tgi": ["text-generation-launcher", "--model-id", "/m"],
}


def cases(corpora: Sequence[Path]) -> list[Path]:
    found = []
    for corpus in corpora:
        for case in sorted(p for p in corpus.iterdir() if (p / "case.yaml").is_file()):
            labels = yaml.safe_load((case / "case.yaml").read_text(encoding="utf-8"))
            fix = labels.get("fix")
            flag_or_env = isinstance(fix, dict) and fix.get("kind") in ("flag", "env")
            if flag_or_env and labels.get("engine") in BASE:
                found.append(case)
    return found


class StandinLauncher:
    """Starts the stand-in for one case and diagnoses what it printed (as ``launch`` does)."""

    def __init__(self, case: Path, engine: str) -> None:
        self.case, self.engine = case, engine
        self.runs = Path(tempfile.mkdtemp(prefix="replay-"))
        self.launches = 0

    def __call__(self, argv: Sequence[str], env: Mapping[str, str]) -> Any:
        from servedoctor.diagnose import diagnose_path
        from servedoctor.experiments.trial import LaunchReport

        self.launches += 1
        log = self.runs / f"run{self.launches}.log"
        proc = subprocess.run(
            list(argv),
            env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(SRC), **env,
                 "STANDIN_CASE": str(self.case)},
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        log.write_text(proc.stdout + proc.stderr, encoding="utf-8")
        if proc.returncode == 0:
            return LaunchReport("healthy", None, 3.0, exit_code=0, run_dir=str(self.runs))
        diagnosis = diagnose_path(log, engine=self.engine)
        return LaunchReport("failed", diagnosis, 2.0, exit_code=proc.returncode)


def work(case_dirs: list[Path]) -> list[dict[str, Any]]:
    """Run in a process whose servedoctor is the tree under test."""
    from servedoctor.experiments.command import parse
    from servedoctor.experiments.planner import Planner
    from servedoctor.experiments.runner import TrialRunner

    results = []
    for case in case_dirs:
        labels = yaml.safe_load((case / "case.yaml").read_text(encoding="utf-8"))
        launch = StandinLauncher(case, labels["engine"])
        command = parse([sys.executable, str(STANDIN), *BASE[labels["engine"]]])
        # one more than the budget: the re-run that confirms a healthy trial
        planner = Planner(command, TrialRunner(command, launch), max_trials=MAX_TRIALS + 1)
        result = planner.run()
        refused = sum(1 for t in result.trials if t.outcome == "rejected")
        results.append({
            "case": case.name,
            "fixed": result.outcome == "fixed",
            "trials": result.trials_to_healthy,
            "refused": refused,
            "changes": [c.describe() for c in result.changes],
        })  # fmt: skip
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpora", nargs="*", type=Path)
    parser.add_argument("--baseline-src", type=Path)
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--cases", nargs="*", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(work(args.cases or [])))
        return 0
    chosen = cases(args.corpora)
    trees = {"this checkout": SRC}
    if args.baseline_src:
        trees = {"baseline": args.baseline_src, **trees}
    print(f"{len(chosen)} resolved cases whose confirmed fix is a flag or env var")
    for name, src in trees.items():
        proc = subprocess.run(
            [sys.executable, __file__, "--worker", str(src), "--cases", *map(str, chosen)],
            env={**os.environ, "PYTHONPATH": str(src)},
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if proc.returncode != 0:
            print(f"{name}: worker failed: {proc.stderr.strip()[-800:]}")
            continue
        rows = json.loads(proc.stdout.strip().splitlines()[-1])
        fixed = [r for r in rows if r["fixed"] and (r["trials"] or 0) <= MAX_TRIALS]
        mean = sum(r["trials"] or 0 for r in fixed) / len(fixed) if fixed else float("nan")
        refused = sum(r["refused"] for r in rows)
        print(f"  {name:<14} fixed within {MAX_TRIALS} trials {len(fixed)}/{len(rows)}"
              f"  mean trials to the fix {mean:.2f}  refused spellings {refused}")  # fmt: skip
        for r in rows:
            mark = "fixed" if r["fixed"] else "not fixed"
            print(f"    {r['case']:<22} {mark:<9} trials={r['trials']} {'; '.join(r['changes'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
