"""The search: one change per trial, simplest and likeliest first, then minimise.

1. Launch the command unchanged (the baseline) and diagnose it.
2. Try candidates one at a time, best value-per-cost first. Each trial differs from a
   command that already ran by exactly one change.
   - healthy: re-run once to confirm, minimise the change set with ddmin, stop;
   - the same failure (error_class + phase): next candidate;
   - a different failure: information. If the new failure is no earlier than the current
     one, the change is kept and the new diagnosis' candidates are tried on top of it (one
     change at a time again); when those run out the search backtracks.
   - a probe (``CUDA_LAUNCH_BLOCKING=1``) is never kept; its sharper diagnosis only adds
     candidates.
3. When no single change works: combine the partial changes (those that moved the failure)
   in one trial and, if that works, minimise with ddmin to a 1-minimal set.

With a runner that launches several trials at once (``fix --parallel N``), the next N
candidates of the current queue are launched side by side before the first is asked for
(:meth:`Planner._look_ahead`). The search itself is unchanged: it still takes one result at
a time, in queue order, so its verdicts are the sequential ones whatever order the launches
finish in; only the wall time shrinks. A launch the search never asks for (it ended first)
is counted as unused, never as a trial.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from servedoctor.engines.adapter import other_spellings
from servedoctor.experiments.candidates import Candidate, ChangeHistory, build_candidates
from servedoctor.experiments.command import CommandLike
from servedoctor.experiments.ddmin import ddmin
from servedoctor.experiments.releases import Resolver
from servedoctor.experiments.runner import TrialRunner
from servedoctor.experiments.trial import Signature, Trial, changes_key, merge_change
from servedoctor.model import Change, Diagnosis
from servedoctor.taxonomy import PHASE_ORDER

__all__ = ["FixResult", "PlanEvent", "Planner"]

MAX_DEPTH = 4
#: Past findings for a failure class: change → how often it fixed that failure here.
HistoryFor = Callable[[str | None], Mapping[Change, ChangeHistory]]


@dataclass(frozen=True)
class PlanEvent:
    kind: Literal["start", "done"]
    role: str
    changes: tuple[Change, ...]
    tested: Change | None
    why: str
    left: int
    trial: Trial | None = None


@dataclass(frozen=True)
class FixResult:
    outcome: Literal["fixed", "not_fixed"]
    changes: tuple[Change, ...]
    trials: tuple[Trial, ...]
    reason: str
    trials_to_healthy: int | None = None
    interrupted: bool = False

    @property
    def baseline(self) -> Trial | None:
        return self.trials[0] if self.trials else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "changes": [c.to_dict() for c in self.changes],
            "reason": self.reason,
            "interrupted": self.interrupted,
            "trials_to_healthy": self.trials_to_healthy,
            "trials": [t.to_dict() for t in self.trials],
        }


@dataclass
class _State:
    """A command that ran and failed, and the candidates still to try on top of it."""

    applied: tuple[Change, ...]
    trial: Trial
    queue: list[Candidate] = field(default_factory=list)


class _Stop(Exception):
    def __init__(self, reason: str, interrupted: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.interrupted = interrupted


def _rank(phase: str | None) -> int:
    return PHASE_ORDER.get(phase or "", -1)


class Planner:
    def __init__(
        self,
        command: CommandLike,
        runner: TrialRunner,
        *,
        history: HistoryFor | Mapping[Change, ChangeHistory] | None = None,
        max_trials: int = 20,
        budget_s: float | None = None,
        on_event: Callable[[PlanEvent], None] | None = None,
        baseline: Trial | None = None,
        baseline_duration_s: float = 30.0,
        moved: Sequence[Change] = (),
        moved_aliases: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self.command = command
        self.runner = runner
        if callable(history):
            self.history_for: HistoryFor = history
        else:
            fixed = dict(history or {})
            self.history_for = lambda _error_class: fixed
        self.max_trials = max_trials
        self.deadline = None if budget_s is None else time.monotonic() + budget_s
        self.on_event = on_event
        self.baseline = baseline
        self.baseline_diagnosis = baseline.diagnosis if baseline else None
        self.baseline_duration_s = baseline_duration_s
        self._releases: Resolver | None = None
        self.moved = tuple(moved)  # packages back to the versions of the last healthy run
        self.moved_aliases = dict(moved_aliases or {})  # their import names (PyYAML: yaml)
        self.stack: list[_State] = []
        self.partials: list[Change] = []
        self.first_healthy: int | None = None
        self.reference: Signature | None = None

    # -- candidates ---------------------------------------------------------------------
    def candidates_for(self, applied: tuple[Change, ...], trial: Trial) -> list[Candidate]:
        diagnosis = trial.diagnosis or self.baseline_diagnosis
        if diagnosis is None:
            diagnosis = Diagnosis(
                file="", error_class=None, phase=None, component=None, culprit=None, summary=""
            )
        cmd = self.command
        for change in applied:
            cmd = cmd.apply(change)
        touched = {(c.kind, c.name) for c in applied}
        cands = build_candidates(
            diagnosis=diagnosis,
            command=cmd,
            base_cost_s=trial.duration_s or self.baseline_duration_s,
            history=self.history_for(diagnosis.error_class),
            packages=self.runner.overlays is not None,
            moved=self.moved if self.runner.overlays is not None else (),
            moved_aliases=self.moved_aliases,
            engine_version=_engine_version(diagnosis),
            resolve=self._resolver().concrete if self.runner.overlays is not None else None,
        )
        return [c for c in cands if c.runnable and (c.change.kind, c.change.name) not in touched]

    def _resolver(self) -> Resolver:
        """Versions stated as evidence → requirements, with the overlays' pip (one per run)."""
        overlays = self.runner.overlays
        assert overlays is not None
        if self._releases is None:
            self._releases = Resolver(
                overlays.python, tuple(overlays.pip_args), engine=self.command.engine
            )
        return self._releases

    def left(self) -> int:
        seen: set[tuple[Any, ...]] = set()
        for state in self.stack:
            for cand in state.queue:
                key = changes_key(merge_change(state.applied, cand.change))
                if self.runner.known(merge_change(state.applied, cand.change)) is None:
                    seen.add(key)
        return len(seen)

    # -- trials -------------------------------------------------------------------------
    def _counted(self) -> int:
        """Trials that tested the server: a spelling it refused at start-up does not count."""
        return sum(
            1 for t in self.runner.trials if t.role != "baseline" and t.outcome != "rejected"
        )

    def _trial(
        self,
        changes: tuple[Change, ...],
        *,
        role: Literal["baseline", "candidate", "confirm", "combine", "minimise"],
        why: str,
        tested: Change | None = None,
        reference: Signature | None = None,
    ) -> Trial:
        cached = self.runner.known(changes) if role != "confirm" else None
        if cached is None and role != "baseline":
            if self._counted() >= self.max_trials:
                raise _Stop(f"reached --max-trials {self.max_trials}")
            if self.deadline is not None and time.monotonic() > self.deadline:
                raise _Stop("reached --budget-minutes")
        if cached is None and self.on_event:
            self.on_event(PlanEvent("start", role, changes, tested, why, self.left()))
        trial = self.runner.run(changes, role=role, why=why, tested=tested, reference=reference)
        if cached is None and self.on_event:
            self.on_event(PlanEvent("done", role, changes, tested, why, self.left(), trial))
        if trial.outcome == "interrupted":
            raise _Stop("interrupted", interrupted=True)
        return trial

    def _confirmed(self, changes: tuple[Change, ...], trial: Trial) -> bool:
        if self.first_healthy is None:
            self.first_healthy = self._counted()
        again = self._trial(changes, role="confirm", why="re-run to confirm", tested=None)
        return again.healthy

    def _minimise(self, changes: tuple[Change, ...]) -> tuple[Change, ...]:
        if len(changes) < 2:
            return changes

        def works(subset: list[Change]) -> bool:
            t = self._trial(
                tuple(subset),
                role="minimise",
                why="ddmin: is this subset enough?",
                reference=self.reference,
            )
            return t.healthy

        return tuple(ddmin(list(changes), works, ahead=self._launch_ahead))

    # -- the search ---------------------------------------------------------------------
    def run(self) -> FixResult:
        try:
            return self._run()
        except _Stop as stop:
            return FixResult(
                outcome="not_fixed",
                changes=(),
                trials=tuple(self.runner.trials),
                reason=stop.reason,
                interrupted=stop.interrupted,
            )

    def _fixed(self, changes: tuple[Change, ...], reason: str) -> FixResult:
        minimal = self._minimise(changes)
        return FixResult(
            outcome="fixed",
            changes=minimal,
            trials=tuple(self.runner.trials),
            reason=reason,
            trials_to_healthy=self.first_healthy,
        )

    def _run(self) -> FixResult:
        if self.baseline is not None:
            base = self.runner.record(self.baseline)
        else:
            base = self._trial((), role="baseline", why="the command as given")
        if base.healthy:
            return FixResult("fixed", (), tuple(self.runner.trials), "already healthy", 0)
        if self.baseline_diagnosis is None:
            self.baseline_diagnosis = base.diagnosis
        self.reference = base.signature
        self.stack.append(_State((), base, self.candidates_for((), base)))

        while self.stack:
            state = self.stack[-1]
            if not state.queue:
                self.stack.pop()
                continue
            self._look_ahead(state)
            cand = state.queue.pop(0)
            changes = merge_change(state.applied, cand.change)
            if self.runner.known(changes) is not None:
                continue
            trial = self._trial(
                changes,
                role="candidate",
                why=cand.why,
                tested=cand.change,
                reference=state.trial.signature,
            )
            if trial.healthy:
                if self._confirmed(changes, trial):
                    return self._fixed(changes, f"healthy after {cand.change.describe()}")
                continue
            if trial.outcome == "rejected":
                # the server refused this spelling: its other spellings of the same knob next
                engine = self.runner.command.engine
                others = [
                    dataclasses.replace(cand, change=alt, why=f"{cand.why} (another spelling)")
                    for alt in other_spellings(cand.change, engine)
                ]
                state.queue = [*others, *state.queue]
                continue
            if cand.is_probe:
                self._extend(state, trial)
                continue
            if trial.outcome == "different_failure":
                self.partials.append(cand.change)
                if len(self.stack) < MAX_DEPTH and _rank(trial.phase) >= _rank(state.trial.phase):
                    child = _State(changes, trial, self.candidates_for(changes, trial))
                    self.stack.append(child)

        combo: tuple[Change, ...] = ()
        for change in self.partials:
            if all((c.kind, c.name) != (change.kind, change.name) for c in combo):
                combo = (*combo, change)
        if len(combo) >= 2 and self.runner.known(combo) is None:
            trial = self._trial(
                combo,
                role="combine",
                why="every change that moved the failure",
                reference=self.reference,
            )
            if trial.healthy and self._confirmed(combo, trial):
                return self._fixed(combo, "healthy with the combined partial changes")
        return FixResult("not_fixed", (), tuple(self.runner.trials), "no candidate made it healthy")

    def _look_ahead(self, state: _State) -> None:
        """Launch the next candidates of ``state`` side by side (see :meth:`_launch_ahead`)."""
        self._launch_ahead([merge_change(state.applied, c.change) for c in state.queue])

    def _launch_ahead(self, upcoming: Sequence[Sequence[Change]]) -> None:
        """Launch the first change sets of ``upcoming`` not yet run, side by side, as many
        as the runner runs at once and the trial budget leaves room for. Nothing is
        launched while the next result is already waiting."""
        width = self.runner.width
        if width < 2 or (self.deadline is not None and time.monotonic() > self.deadline):
            return
        room = self.max_trials - self._counted() - self.runner.unused
        batch: list[tuple[Change, ...]] = []
        keys: set[tuple[tuple[str, str, str], ...]] = set()
        for changes in upcoming:
            if len(batch) >= min(width, room):
                break
            key = changes_key(changes)
            if key in keys or self.runner.known(changes):
                continue
            if self.runner.waiting(changes):
                if not batch:
                    return  # the next result is here already: nothing would run alone
                continue
            keys.add(key)
            batch.append(tuple(changes))
        if len(batch) >= 2:
            self.runner.prefetch(batch)

    def _extend(self, state: _State, probe: Trial) -> None:
        """A probe's sharper diagnosis adds its candidates to the current state's queue."""
        known = {(c.change.kind, c.change.name, c.change.value) for c in state.queue}
        extra = [
            c
            for c in self.candidates_for(state.applied, probe)
            if not c.is_probe and (c.change.kind, c.change.name, c.change.value) not in known
        ]
        if extra:
            state.queue = sorted([*extra, *state.queue], key=lambda c: -c.score)


def _engine_version(diagnosis: Diagnosis) -> str | None:
    """The engine release the diagnosis spelled its changes for (the log's or the server's)."""
    version = diagnosis.extras.get("engine_version") if diagnosis.extras else None
    return version if isinstance(version, str) else None
