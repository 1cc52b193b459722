"""The job a failing library was doing, read from the server's own selection lines.

vLLM states which library it chose for each job while it loads ("Using FlashInfer for top-p &
top-k sampling.", "Using FLASH_ATTN attention backend"). When the failure's message (or the
located culprit) names a library that the log chose for exactly one job, the failure happened
in that job: its component, and the job's portable knob is the one change that moves the job
off that library, whatever the message's own wording suggests (a FlashInfer refusal read as
an attention fault when FlashInfer only sampled).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from servedoctor.datafile import load_yaml
from servedoctor.diagnose.hypotheses import setting_of
from servedoctor.diagnose.observe import Observations
from servedoctor.knowledge.propose import propose
from servedoctor.knowledge.schema import ChangeSpec
from servedoctor.model import Hypothesis
from servedoctor.taxonomy import Component

#: Above a rule's generic backend switch (the rule read the message alone), below a rule that
#: names the exact setting.
SELECTION_CONFIDENCE = 0.6
#: Classes of a fault inside a job's kernels; an install that lacks a package or does not
#: fit the environment is the environment's, whichever job first imported it.
KERNEL_CLASSES = frozenset(
    {
        "other",
        "arch_unsupported",
        "illegal_memory_access",
        "device_assert",
        "triton_error",
        "cublas_error",
        "numerical",
        "hang",
    }
)


class _Portable(BaseModel):
    model_config = ConfigDict(extra="forbid")
    knob: str
    library: str | None


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid")
    libraries: dict[str, str]
    portable: dict[Component, _Portable]


#: The groups of signals.yaml's selection patterns that capture the chosen library's name.
_NAME_FIELDS = ("library", "prefill", "kernel", "method")


@dataclass(frozen=True, slots=True)
class Job:
    component: str
    library: str
    line: int


@lru_cache(maxsize=1)
def _table() -> tuple[dict[str, re.Pattern[str]], dict[str, _Portable]]:
    data = _Table.model_validate(load_yaml(Path(__file__).parent / "selections.yaml"))
    return (
        {name: re.compile(pattern) for name, pattern in data.libraries.items()},
        {str(job): row for job, row in data.portable.items()},
    )


def libraries_named(text: str) -> set[str]:
    patterns, _ = _table()
    return {name for name, regex in patterns.items() if regex.search(text)}


def jobs_of(obs: Observations) -> list[Job]:
    """Every (job, library) the log's selection lines state."""
    jobs: list[Job] = []
    for event in obs.events:
        if event.kind != "selection":
            continue
        chosen = " ".join(str(event.fields[k]) for k in _NAME_FIELDS if k in event.fields)
        for library in libraries_named(chosen):
            jobs.append(Job(str(event.fields["name"]), library, event.line))
    return jobs


def failing_job(obs: Observations, message: str, culprit: str | None) -> Job | None:
    """The one job the log chose a library for that the failure names."""
    named = libraries_named(message) | libraries_named(culprit or "")
    if not named:
        return None
    found = [job for job in jobs_of(obs) if job.library in named]
    if len({job.component for job in found}) != 1:
        return None  # nothing chosen, or the library did several jobs
    return found[-1]


def move_off(job: Job, obs: Observations) -> Hypothesis | None:
    """The job's portable knob, spelled for this engine and release."""
    _, portable = _table()
    row = portable.get(job.component)
    if row is None or row.library == job.library:
        return None
    spec = ChangeSpec(
        knob=row.knob,
        cause=f"{job.library}'s {job.component} kernels fail here: the server chose "
        f"{job.library} for {job.component} (line {job.line}).",
        confidence=SELECTION_CONFIDENCE,
    )
    change = propose(spec, {}, setting_of(obs))
    if change is None:
        return None
    return Hypothesis(
        id="SELECTION.1",
        cause=spec.cause,
        confidence=SELECTION_CONFIDENCE,
        changes=(change,),
        why=f"the failure names {job.library}, which the log chose for {job.component} only",
        references=(),
        rule=None,
    )
