"""Write servedoctor's precedents (knowledge/data/precedents.json) from labelled corpora.

Each case folder holds ``log.txt`` and ``case.yaml`` (../shared/corpus/TAXONOMY.md). The
log is read the way ``diagnose`` reads one (the same scanner and cleaning), so a case's
words are the words diagnose would see.

    python scripts/precedents/build_precedents.py            # scored sets (a README) + dev
    python scripts/precedents/build_precedents.py DIR ...    # these corpora only
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

from servedoctor.diagnose.precedent import DATA, Reading, case_record
from servedoctor.logs.events import extract
from servedoctor.logs.scan import Scanner

ROOT = Path(__file__).resolve().parents[2]
#: A held-out set joins once it has been scored: its README records that score.
SCORED = sorted(p.parent for p in (ROOT / "tests" / "corpus").glob("holdout*/README.md"))
DEFAULT = [*SCORED, ROOT.parent / "shared" / "corpus" / "dev"]


def read(log: Path) -> Reading:
    reading = Reading()
    with log.open("rb") as stream:
        extract(reading.watch(Scanner(stream)))
    return reading


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpora", nargs="*", type=Path, default=DEFAULT)
    parser.add_argument("--out", type=Path, default=DATA)
    args = parser.parse_args()
    cases = []
    for corpus in args.corpora:
        if not corpus.is_dir():
            print(f"error: no corpus at {corpus}", file=sys.stderr)
            return 2
        for folder in sorted(p for p in corpus.iterdir() if (p / "case.yaml").is_file()):
            labels = yaml.safe_load((folder / "case.yaml").read_text(encoding="utf-8"))
            labels.setdefault("id", folder.name)
            cases.append(case_record(corpus.name, labels, read(folder / "log.txt")))
    body = {"schema": 1, "corpora": sorted({c["corpus"] for c in cases}), "cases": cases}
    args.out.write_text(
        json.dumps(body, indent=None, separators=(",", ":")) + "\n", encoding="utf-8"
    )
    print(f"{len(cases)} cases from {len(body['corpora'])} corpora → {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
