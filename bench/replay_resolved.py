"""Replay benchmark: does ``fix`` reach a working server on real failures resolved in public?

Each case whose thread confirms one flag or environment variable (``fix:`` in case.yaml) is
replayed: a stand-in (bench/standin_resolved.py) started under the engine's own command line
prints the case's real log until the confirmed change is applied, and refuses flags its
release does not have. servedoctor's real planner, trial runner and diagnosis drive it, one
change per trial, as ``servedoctor fix`` does. Reported per servedoctor tree, in the same
run: the share of cases fixed within 6 trials, the mean trials to the fix, and the spellings
the server refused.

Package cases (the thread confirms one package version) replay until the stand-in's own
environment has that version, which only fix's overlay can give it: pip installs offline
from a folder holding a wheel of the confirmed version (and no other), so a trial of any
other version is refused with pip's reason. They run twice: from the log's evidence alone,
and with a healthy record of the environment at the confirmed version (the memory of what
worked, as ``launch --store`` keeps it).

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
sys.path.insert(0, str(HERE))
SRC = HERE.parent / "src"
STANDIN = HERE / "standin_resolved.py"
MAX_TRIALS = 6
BASE = {
    "sglang": ["sglang.launch_server", "--model-path", "/m"],
    "vllm": ["vllm", "serve", "/m"],
    "tgi": ["text-generation-launcher", "--model-id", "/m"],
}


def _package_fix(fix: Any) -> bool:
    """A package fix pip can install: a valid name at one version."""
    from packaging.requirements import InvalidRequirement, Requirement

    if not (isinstance(fix, dict) and fix.get("kind") == "package" and fix.get("value")):
        return False
    try:
        req = Requirement(f"{fix['name']}=={fix['value']}")
    except InvalidRequirement:
        return False
    return req.name == fix["name"]


def cases(corpora: Sequence[Path], kinds: Sequence[str] = ("flag", "env")) -> list[Path]:
    found = []
    for corpus in corpora:
        for case in sorted(p for p in corpus.iterdir() if (p / "case.yaml").is_file()):
            labels = yaml.safe_load((case / "case.yaml").read_text(encoding="utf-8"))
            fix = labels.get("fix")
            if labels.get("engine") not in BASE or not isinstance(fix, dict):
                continue
            if fix.get("kind") in kinds and (fix["kind"] != "package" or _package_fix(fix)):
                found.append(case)
    return found


class StandinLauncher:
    """Starts the stand-in for one case and diagnoses what it printed (as ``launch`` does)."""

    def __init__(self, case: Path, engine: str, version: str | None = None) -> None:
        self.version = version
        self.case, self.engine = case, engine
        self.runs = Path(tempfile.mkdtemp(prefix="replay-"))
        self.launches = 0

    def __call__(self, argv: Sequence[str], env: Mapping[str, str]) -> Any:
        from servedoctor.experiments.trial import LaunchReport

        self.launches += 1
        log = self.runs / f"run{self.launches}.log"
        inherited = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(SRC)}
        proc = subprocess.run(
            list(argv),
            env={**inherited, **env, "STANDIN_CASE": str(self.case),
                 # what the stand-in had before any trial: only a change to it is a change
                 "STANDIN_INHERITED": json.dumps(inherited)},
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        log.write_text(proc.stdout + proc.stderr, encoding="utf-8")
        if proc.returncode == 0:
            return LaunchReport("healthy", None, 3.0, exit_code=0, run_dir=str(self.runs))
        return LaunchReport("failed", self.diagnose(log, argv, proc.returncode), 2.0,
                            exit_code=proc.returncode)  # fmt: skip

    def diagnose(self, log: Path, argv: Sequence[str], code: int) -> Any:
        """As launch does: the log read with what the supervisor saw (the process exited), for
        the engine release installed where the server runs."""
        import inspect

        from servedoctor.diagnose import diagnose_path

        try:
            from servedoctor.launch.failure import diagnose_run
            from servedoctor.launch.types import Failure
        except ImportError:  # an older tree
            return diagnose_path(log, engine=self.engine, engine_version=self.version)
        failure = Failure("process_exit", "startup", f"exit code {code}", 2.0)
        extra = {"engine_version": self.version}
        if "engine_version" not in inspect.signature(diagnose_run).parameters:
            extra = {}
        return diagnose_run(log, failure, engine=self.engine, argv=list(argv), **extra)


def _overlays(fix: dict[str, Any], root: Path) -> Any:
    """Overlays whose pip sees only a wheel of the confirmed version (built here, offline)."""
    sys.path.insert(0, str(HERE.parent / "tests" / "env"))
    from pyenvs import build_wheel

    from servedoctor.experiments.overlay import Overlays

    wheels = root / "wheels"
    build_wheel(wheels, fix["name"], str(fix["value"]), {})
    return Overlays(sys.executable, cache=root / "overlays",
                    pip_args=["--no-index", "--find-links", str(wheels)])  # fmt: skip


def work(case_dirs: list[Path], memory: bool = False) -> list[dict[str, Any]]:
    """Run in a process whose servedoctor is the tree under test."""
    import inspect

    from standin_resolved import switched_off

    from servedoctor.experiments.command import parse
    from servedoctor.experiments.planner import Planner
    from servedoctor.experiments.runner import TrialRunner
    from servedoctor.model import Change

    packages_ok = "overlays" in inspect.signature(TrialRunner).parameters
    results = []
    for case in case_dirs:
        labels = yaml.safe_load((case / "case.yaml").read_text(encoding="utf-8"))
        fix = labels["fix"]
        launch = StandinLauncher(case, labels["engine"], labels.get("engine_version"))
        argv = [sys.executable, str(STANDIN), *BASE[labels["engine"]]]
        if switched_off(fix, labels["engine"], labels.get("engine_version")):
            argv.append(fix["name"])  # the case starts with the switch its fix takes away
        command = parse(argv)
        extra: dict[str, Any] = {}
        runner_extra: dict[str, Any] = {}
        if fix["kind"] == "package" and packages_ok:
            runner_extra["overlays"] = _overlays(fix, launch.runs)
            if memory:  # the last healthy record had the confirmed version
                extra["moved"] = [Change("package", fix["name"], f"=={fix['value']}")]
        runner = TrialRunner(command, launch, **runner_extra)
        # one more than the budget: the re-run that confirms a healthy trial
        planner = Planner(command, runner, max_trials=MAX_TRIALS + 1, **extra)
        result = planner.run()
        refused = sum(1 for t in result.trials if t.outcome == "rejected")
        results.append({
            "case": case.name,
            "fixed": result.outcome == "fixed",
            "trials": result.trials_to_healthy,
            "refused": refused,
            "changes": [c.describe() for c in result.changes],
            "launches": launch.launches,
        })  # fmt: skip
    return results


def report(name: str, rows: list[dict[str, Any]]) -> None:
    fixed = [r for r in rows if r["fixed"] and (r["trials"] or 0) <= MAX_TRIALS]
    mean = sum(r["trials"] or 0 for r in fixed) / len(fixed) if fixed else float("nan")
    refused = sum(r["refused"] for r in rows)
    print(f"  {name:<22} fixed within {MAX_TRIALS} trials {len(fixed)}/{len(rows)}"
          f"  mean trials to the fix {mean:.2f}  refused {refused}")  # fmt: skip
    for r in rows:
        mark = "fixed" if r["fixed"] else "not fixed"
        print(f"    {r['case']:<22} {mark:<9} trials={r['trials']} {'; '.join(r['changes'])}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpora", nargs="*", type=Path)
    parser.add_argument("--baseline-src", type=Path)
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--cases", nargs="*", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--memory", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--no-packages", action="store_true", help="skip the package cases")
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(work(args.cases or [], memory=args.memory)))
        return 0
    trees = {"this checkout": SRC}
    if args.baseline_src:
        trees = {"baseline": args.baseline_src, **trees}
    groups = [("flag or env var", cases(args.corpora), [[]])]
    if not args.no_packages:
        groups.append(("package version", cases(args.corpora, ("package",)), [[], ["--memory"]]))
    for what, chosen, variants in groups:
        print(f"{len(chosen)} resolved cases whose confirmed fix is a {what}")
        for name, src in trees.items():
            for variant in variants:
                label = name + (" + healthy record" if variant else "")
                proc = subprocess.run(
                    [sys.executable, __file__, "--worker", str(src), *variant,
                     "--cases", *map(str, chosen)],
                    env={**os.environ, "PYTHONPATH": str(src)},
                    capture_output=True, text=True, check=False,
                )  # fmt: skip
                if proc.returncode != 0:
                    print(f"{label}: worker failed: {proc.stderr.strip()[-800:]}")
                    continue
                report(label, json.loads(proc.stdout.strip().splitlines()[-1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
