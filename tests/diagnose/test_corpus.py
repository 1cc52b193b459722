"""Accuracy on the real public failure logs in ../shared/corpus/dev (regression guard)."""

from __future__ import annotations

from pathlib import Path

from servedoctor.diagnose.evaluate import evaluate


def test_dev_corpus_accuracy_meets_targets(corpus: Path) -> None:
    score = evaluate(corpus)
    assert score.cases >= 40
    assert not score.errors
    assert (score.accuracy("error_class") or 0) >= 0.90
    assert (score.accuracy("phase") or 0) >= 0.80
    assert (score.accuracy("component") or 0) >= 0.70


def test_eval_counts_serving_as_any_serving_phase(tmp_path: Path) -> None:
    case = tmp_path / "x-1"
    case.mkdir()
    (case / "case.yaml").write_text(
        "id: x-1\nerror_class: device_assert\nphase: serving\ncomponent: unknown\nculprit: null\n"
    )
    (case / "log.txt").write_text(
        'Traceback (most recent call last):\n  File "/x/sglang/srt/model_executor/model_runner.py", '
        "line 1, in forward_decode\n    y = f(x)\nRuntimeError: CUDA error: device-side assert triggered\n"
    )
    score = evaluate(tmp_path)
    assert score.accuracy("error_class") == 1.0
    assert score.accuracy("phase") == 1.0  # decode is accepted for a 'serving' label
    assert score.scored["component"] == 0  # 'unknown' labels are not scored
