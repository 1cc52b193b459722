"""Knowledge benchmark: this checkout against another servedoctor, on labelled corpora.

For each corpus (``<case>/case.yaml`` + ``log.txt``), both versions diagnose every log as a
user would (``servedoctor diagnose --json LOG``, in a subprocess, so the other version is
whatever tree ``--baseline-src`` points at, e.g. a ``git worktree`` of the last release).
The same scorer then reads both outputs:

- class, phase and component accuracy (as ``servedoctor eval`` counts them);
- fix@3: the fix the case's thread confirmed is among the first three hypotheses (cases
  with a structured ``fix:``), matched by ``servedoctor.diagnose.fixmatch``;
- with change: diagnosed failures that carry at least one change to try;
- flags valid: proposed flags that exist in the inventory of the case's engine and version.

``--engine-known`` diagnoses each log with ``--engine`` set to the case's engine, as ``launch``
and ``fix`` always know it from the command they run: the gap between the two runs is what
naming the engine from the log alone costs.

Usage: python bench/knowledge_eval.py [--baseline-src DIR] [--engine-known] CORPUS...
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from servedoctor.diagnose.fixmatch import same_fix
from servedoctor.diagnose.precedent import EXCLUDE_ENV
from servedoctor.engines import all_engines
from servedoctor.engines.inventory import inventory
from servedoctor.model import Change
from servedoctor.taxonomy import SERVING_PHASES

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"


def diagnose_all(
    src: Path, logs: list[Path], engine: str | None = None, corpus: str = ""
) -> list[dict[str, Any]]:
    # a corpus being scored never serves as its own precedents (servedoctor.diagnose.precedent)
    env = {**os.environ, "PYTHONPATH": str(src), EXCLUDE_ENV: corpus}
    named = ["--engine", engine] if engine else []
    proc = subprocess.run(
        [sys.executable, "-m", "servedoctor", "diagnose", "--json", *named, *map(str, logs)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    outputs = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if len(outputs) != len(logs):
        raise SystemExit(f"{src}: diagnose failed: {proc.stderr.strip()[-500:]}")
    return outputs


def diagnose_cases(
    src: Path, dirs: list[Path], cases: list[dict[str, Any]], engine_known: bool, corpus: str
) -> list[dict[str, Any]]:
    """Diagnose every case's log, one subprocess per engine when the engine is given."""
    if not engine_known:
        return diagnose_all(src, [d / "log.txt" for d in dirs], corpus=corpus)
    outputs: list[dict[str, Any]] = [{}] * len(dirs)
    by_engine: dict[str | None, list[int]] = {}
    for i, labels in enumerate(cases):
        engine = labels.get("engine")
        by_engine.setdefault(engine if engine in all_engines() else None, []).append(i)
    for engine, idx in by_engine.items():
        done = diagnose_all(src, [dirs[i] / "log.txt" for i in idx], engine, corpus)
        for i, out in zip(idx, done, strict=True):
            outputs[i] = out
    return outputs


def score(cases: list[dict[str, Any]], outputs: list[dict[str, Any]]) -> dict[str, Any]:
    tally = {k: [0, 0] for k in ("error_class", "phase", "component", "fix@3", "change", "flags")}
    for labels, out in zip(cases, outputs, strict=True):
        for name in ("error_class", "phase", "component"):
            want = labels.get(name)
            if name == "component" and want in (None, "unknown"):
                continue
            got = out.get(name)
            ok = got in SERVING_PHASES if name == "phase" and want == "serving" else want == got
            tally[name][0] += ok
            tally[name][1] += 1
        changes = [Change(**c) for h in out["hypotheses"] for c in h["changes"]]
        if out.get("error_class"):
            tally["change"][0] += bool(changes)
            tally["change"][1] += 1
        engine = labels.get("engine")
        inv = inventory(engine) if engine else None
        for change in changes:
            if change.kind == "flag" and inv is not None and change.value != "<remove>":
                stated = labels.get("engine_version")
                tally["flags"][0] += inv.accepts_spelling(change.name, stated) is not None
                tally["flags"][1] += 1
        fix = labels.get("fix")
        if isinstance(fix, dict) and fix.get("kind") in ("flag", "env", "package"):
            top = [Change(**c) for h in out["hypotheses"][:3] for c in h["changes"]]
            tally["fix@3"][0] += any(same_fix(c, fix, engine) for c in top)
            tally["fix@3"][1] += 1
    return tally


def fmt(cell: list[int]) -> str:
    got, n = cell
    return f"{got / n:.3f} ({got}/{n})" if n else "n/a"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpora", nargs="+", type=Path)
    parser.add_argument("--baseline-src", type=Path, help="src/ of the servedoctor to compare")
    parser.add_argument(
        "--engine-known", action="store_true", help="give each log its case's engine"
    )
    args = parser.parse_args()
    versions = {"this checkout": SRC}
    if args.baseline_src:
        versions = {"baseline": args.baseline_src, **versions}
    pooled: dict[str, dict[str, list[int]]] = {}
    for corpus in args.corpora:
        dirs = sorted(p for p in corpus.iterdir() if (p / "case.yaml").is_file())
        cases = [yaml.safe_load((d / "case.yaml").read_text()) for d in dirs]
        print(f"== {corpus} ({len(dirs)} cases)")
        for name, src in versions.items():
            outputs = diagnose_cases(src, dirs, cases, args.engine_known, corpus.resolve().name)
            tally = score(cases, outputs)
            total = pooled.setdefault(name, {k: [0, 0] for k in tally})
            for k, (got, n) in tally.items():
                total[k][0] += got
                total[k][1] += n
            print(f"  {name:<14} {'  '.join(f'{k} {fmt(v)}' for k, v in tally.items())}")
    if len(args.corpora) > 1:
        print(f"== pooled ({len(args.corpora)} corpora)")
        for name, total in pooled.items():
            print(f"  {name:<14} {'  '.join(f'{k} {fmt(v)}' for k, v in total.items())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
