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
from servedoctor.diagnose.fixmatch import same_fix
from servedoctor.diagnose.precedent import leaving_out
from servedoctor.engines import all_engines
from servedoctor.engines.inventory import inventory
from servedoctor.errors import UserError
from servedoctor.model import REMOVE, Diagnosis
from servedoctor.taxonomy import SERVING_PHASES

FIELDS = ("error_class", "phase", "component", "culprit")
#: Hypotheses looked at for fix@3: the confirmed fix among the first three.
TOP = 3


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
    fixes: int = 0  # cases whose thread confirms one flag, env var or package
    fixed_at_3: int = 0  # ... whose confirmed fix is among the first three hypotheses
    flags_proposed: int = 0
    flags_valid: int = 0  # proposed flags that exist in the inventory of the case's engine
    # ... that do not, but are the latest release's spelling for a log that states no release
    # (an unknown release is taken to be the latest; the thread named an older one)
    flags_unstated: int = 0
    with_change: int = 0  # diagnosed failures that carry at least one change
    failures: int = 0

    def accuracy(self, name: str) -> float | None:
        return self.correct[name] / self.scored[name] if self.scored[name] else None

    def fix_at_3(self) -> float | None:
        return self.fixed_at_3 / self.fixes if self.fixes else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "cases": self.cases,
            "accuracy": {f: self.accuracy(f) for f in FIELDS},
            "scored": self.scored,
            "correct": self.correct,
            "misses": [asdict(m) for m in self.misses],
            "errors": self.errors,
            "fix_at_3": {"cases": self.fixes, "found": self.fixed_at_3},
            "flags": {
                "proposed": self.flags_proposed,
                "valid": self.flags_valid,
                "latest_for_unstated_release": self.flags_unstated,
            },
            "with_change": {"failures": self.failures, "with_change": self.with_change},
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
    _score_changes(labels, diagnosis, score)
    return diagnosis


def _score_changes(labels: dict[str, Any], diagnosis: Diagnosis, score: Score) -> None:
    engine = labels.get("engine") or diagnosis.engine
    version = labels.get("engine_version") or diagnosis.extras.get("engine_version")
    changes = [c for h in diagnosis.hypotheses for c in h.changes]
    if diagnosis.failed:
        score.failures += 1
        score.with_change += bool(changes)
    inv = inventory(str(engine)) if engine else None
    spec = all_engines().get(diagnosis.engine or "")
    if spec is not None and engine in spec.embeds:
        # the server runs the labelled engine inside it (KoboldCpp, Ollama: llama.cpp) and
        # its own flags were proposed: the inner engine's parser does not judge them
        inv = inventory(spec.name)
    stated = diagnosis.extras.get("engine_version") or diagnosis.extras.get("release_bound")
    for change in changes:
        if change.kind == "flag" and inv is not None and change.value != REMOVE:
            score.flags_proposed += 1  # (taking a flag away needs no flag the release has)
            if inv.accepts_spelling(change.name, version) is not None:
                score.flags_valid += 1
            elif not stated and inv.flag(change.name, inv.versions[-1]) is not None:
                score.flags_unstated += 1
    fix = labels.get("fix")
    if isinstance(fix, dict) and fix.get("kind") in ("flag", "env", "package"):
        score.fixes += 1
        top = [c for h in diagnosis.hypotheses[:TOP] for c in h.changes]
        if any(same_fix(c, fix, str(engine) if engine else None) for c in top):
            score.fixed_at_3 += 1
        else:
            got = "; ".join(c.describe() for c in top) or None
            want = f"{fix.get('name')} {fix.get('value') or ''}".strip()
            score.misses.append(Miss(case_dir_name(labels), "fix@3", want, got))


def case_dir_name(labels: dict[str, Any]) -> str:
    return str(labels.get("id") or "?")


def evaluate(corpus: Path) -> Score:
    if not corpus.is_dir():
        raise UserError(f"{corpus}: not a directory of cases")
    cases = sorted(p for p in corpus.iterdir() if (p / "case.yaml").is_file())
    if not cases:
        raise UserError(f"{corpus}: no case folders (each needs case.yaml and log.txt)")
    score = Score()
    with leaving_out(corpus.resolve().name):  # a corpus is never its own precedent
        for case in cases:
            score_case(case, score)
    return score
