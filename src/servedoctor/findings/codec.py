"""Values ↔ stored JSON: diagnoses, changes and trials, secrets redacted on the way in."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from servedoctor.experiments.trial import Trial, TrialOutcome, TrialRole
from servedoctor.model import Change, Diagnosis
from servedoctor.redact import MASK, is_secret_name, redact_argv, redact_env, redact_text

__all__ = [
    "change_from_dict",
    "change_store_key",
    "diagnosis_from_dict",
    "redact_change",
    "redacted_diagnosis",
    "trial_from_row_data",
]


def redact_change(change: Change) -> Change:
    if change.value and is_secret_name(change.name):
        return Change(change.kind, change.name, MASK)
    return Change(change.kind, change.name, redact_text(change.value) if change.value else None)


def change_store_key(change: Change) -> str:
    return json.dumps([change.kind, change.name, change.value], separators=(",", ":"))


def change_from_dict(data: Mapping[str, Any]) -> Change:
    return Change.from_dict(data)


def redacted_diagnosis(diagnosis: Diagnosis | None) -> dict[str, Any] | None:
    if diagnosis is None:
        return None
    data = diagnosis.to_dict()
    data["summary"] = redact_text(data["summary"])
    data["evidence"] = [{**e, "text": redact_text(e["text"])} for e in data["evidence"]]
    for hyp in data["hypotheses"]:
        hyp["changes"] = [
            redact_change(change_from_dict(c)).to_dict() for c in hyp.get("changes", [])
        ]
    return data


def diagnosis_from_dict(data: Mapping[str, Any] | None) -> Diagnosis | None:
    return None if data is None else Diagnosis.from_dict(data)


def trial_from_row_data(
    *,
    index: int,
    role: TrialRole,
    changes: Sequence[Change],
    tested: Change | None,
    why: str,
    argv: Sequence[str],
    env: Mapping[str, str],
    outcome: TrialOutcome,
    diagnosis: Mapping[str, Any] | None,
    duration_s: float,
    gpu_peak_mib: float | None,
    exit_code: int | None,
    run_dir: str | None,
    against: str | None,
    placement: Mapping[str, Any] | None = None,
) -> Trial:
    return Trial(
        index=index,
        role=role,
        changes=tuple(changes),
        tested=tested,
        why=why,
        argv=tuple(argv),
        env=dict(env),
        outcome=outcome,
        diagnosis=diagnosis_from_dict(diagnosis),
        duration_s=duration_s,
        gpu_peak_mib=gpu_peak_mib,
        exit_code=exit_code,
        run_dir=run_dir,
        against=against,
        placement=dict(placement) if placement else None,
    )


def redacted_command(
    argv: Sequence[str], env: Mapping[str, str]
) -> tuple[list[str], dict[str, str]]:
    return redact_argv(list(argv)), redact_env(dict(env))
