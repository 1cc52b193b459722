"""Score the diagnosis engine on a labelled corpus laid out like ``corpus/dev``.

Each case is a folder with ``case.yaml`` (labels, see TAXONOMY.md) and ``log.txt``. Fields
are scored as the taxonomy says: phase ``serving`` in a label accepts prefill, decode or
serving; component and culprit only count where the label knows them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from servedoctor.datafile import load_yaml
from servedoctor.diagnose.api import diagnose_path
from servedoctor.errors import UserError
from servedoctor.model import Diagnosis
from servedoctor.taxonomy import SERVING_PHASES

FIELDS = ("error_class", "phase", "component", "culprit")


@dataclass(frozen=True, slots=True)
class Miss:
    case: str
    field: str
    expected: str | None
    got: str | None


@dataclass
class Score:
    cases: int = 0
    scored: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FIELDS, 0))
    correct: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FIELDS, 0))
    misses: list[Miss] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def accuracy(self, name: str) -> float | None:
        return self.correct[name] / self.scored[name] if self.scored[name] else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "cases": self.cases,
            "accuracy": {f: self.accuracy(f) for f in FIELDS},
            "scored": self.scored,
            "correct": self.correct,
            "misses": [asdict(m) for m in self.misses],
            "errors": self.errors,
        }


def _same(name: str, expected: str | None, got: str | None) -> bool:
    if name == "phase" and expected == "serving":
        return got in SERVING_PHASES
    return (expected or None) == (got or None)


def _counts(name: str, expected: str | None) -> bool:
    if name in ("error_class", "phase"):
        return True
    if name == "component":
        return expected not in (None, "unknown")
    return expected is not None  # culprit


def score_case(case_dir: Path, score: Score) -> Diagnosis | None:
    labels = load_yaml(case_dir / "case.yaml")
    score.cases += 1
    try:
        diagnosis = diagnose_path(case_dir / "log.txt")
    except UserError as exc:
        score.errors.append(f"{case_dir.name}: {exc}")
        return None
    for name in FIELDS:
        expected = labels.get(name)
        if not _counts(name, expected):
            continue
        got = getattr(diagnosis, name)
        score.scored[name] += 1
        if _same(name, expected, got):
            score.correct[name] += 1
        else:
            score.misses.append(Miss(case_dir.name, name, expected, got))
    return diagnosis


def evaluate(corpus: Path) -> Score:
    if not corpus.is_dir():
        raise UserError(f"{corpus}: not a directory of cases")
    cases = sorted(p for p in corpus.iterdir() if (p / "case.yaml").is_file())
    if not cases:
        raise UserError(f"{corpus}: no case folders (each needs case.yaml and log.txt)")
    score = Score()
    for case in cases:
        score_case(case, score)
    return score
