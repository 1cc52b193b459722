"""Runs one trial: apply a change set to the command, launch it, classify the outcome.

Results are cached per change set (a set is never launched twice in a session, except the
confirmation re-run) and can be seeded with stored trials, which is how ``fix --resume``
replays an interrupted session without relaunching what already ran.
"""

from __future__ import annotations

import dataclasses
import os
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Sequence

from servedoctor.experiments.command import CommandLike
from servedoctor.experiments.overlay import OverlayError, Overlays
from servedoctor.experiments.trial import (
    REJECTED_BY_PARSER,
    Launcher,
    LaunchReport,
    Signature,
    Trial,
    TrialOutcome,
    TrialRole,
    changes_key,
    headline,
    same_failure,
)
from servedoctor.model import Change, Diagnosis

#: The rule a trial carries when its overlay could not be built (pip, index, no such version).
NO_OVERLAY = "OVERLAY"

__all__ = ["TrialRunner", "classify"]

Key = tuple[bool, tuple[tuple[str, str, str], ...]]


def classify(
    healthy: bool,
    interrupted: bool,
    got: Signature,
    reference: Signature | None,
    *,
    rejected: bool = False,
) -> TrialOutcome:
    """healthy / same failure / different failure (error_class + phase + message) /
    rejected (the server refused its arguments) / interrupted."""
    if interrupted:
        return "interrupted"
    if healthy:
        return "healthy"
    if rejected:
        return "rejected"
    if reference is None:
        return "failed"
    return "same_failure" if same_failure(got, reference) else "different_failure"


class TrialRunner:
    def __init__(
        self,
        command: CommandLike,
        launcher: Launcher,
        *,
        stored: Iterable[Trial] = (),
        on_trial: Callable[[Trial], None] | None = None,
        overlays: Overlays | None = None,
    ) -> None:
        self.command = command
        self.launcher = launcher
        self.overlays = overlays  # package changes run in overlays; without: not runnable
        self.on_trial = on_trial
        self.trials: list[Trial] = []
        self.launched = 0
        self._done: dict[Key, Trial] = {}
        self._stored: dict[Key, deque[Trial]] = defaultdict(deque)
        for trial in stored:
            if trial.outcome != "interrupted":
                self._stored[self._key(trial.role, trial.changes)].append(trial)

    @staticmethod
    def _key(role: TrialRole, changes: Sequence[Change]) -> Key:
        return (role == "confirm", changes_key(changes))

    def known(self, changes: Sequence[Change]) -> Trial | None:
        """The trial of this change set already run in this session, if any."""
        return self._done.get(self._key("candidate", changes))

    def record(self, trial: Trial) -> Trial:
        """Take a trial that ran elsewhere (a failure log given with ``--log``) as done."""
        self.trials.append(trial)
        self._done[self._key(trial.role, trial.changes)] = trial
        if self.on_trial is not None:
            self.on_trial(trial)
        return trial

    def run(
        self,
        changes: Sequence[Change],
        *,
        role: TrialRole,
        why: str,
        tested: Change | None = None,
        reference: Signature | None = None,
    ) -> Trial:
        key = self._key(role, changes)
        if not key[0] and key in self._done:
            return self._done[key]
        if self._stored.get(key):
            old = self._stored[key].popleft()
            # the stored result, under this session's numbering and reasons
            trial = dataclasses.replace(
                old,
                index=len(self.trials),
                role=role,
                changes=tuple(changes),
                tested=tested,
                why=why,
                replayed=True,
            )
        else:
            cmd = self.command
            for change in changes:
                if change.kind != "package":
                    cmd = cmd.apply(change)
            argv, env = cmd.render(), dict(cmd.env)
            packages = [c for c in changes if c.kind == "package"]
            try:
                if packages and self.overlays is not None:
                    env = self.overlays.environment(packages, env, os.environ)
            except OverlayError as exc:  # no index, no such version: a reason, not a failure
                unbuilt = Diagnosis("", None, None, None, None, str(exc), rules=(NO_OVERLAY,))
                report = LaunchReport("failed", unbuilt, 0.0)
            else:
                report = self.launcher(argv, env)
                self.launched += 1
            diag = report.diagnosis
            got: Signature = (
                (diag.error_class, diag.phase, headline(diag)) if diag else (None, None, "")
            )
            outcome = classify(
                report.outcome == "healthy",
                report.outcome == "interrupted",
                got,
                reference,
                rejected=diag is not None
                and not {REJECTED_BY_PARSER, NO_OVERLAY}.isdisjoint(diag.rules),
            )
            trial = Trial(
                index=len(self.trials),
                role=role,
                changes=tuple(changes),
                tested=tested,
                why=why,
                argv=tuple(argv),
                env=env,
                outcome=outcome,
                diagnosis=diag,
                duration_s=report.duration_s,
                gpu_peak_mib=report.gpu_peak_mib,
                exit_code=report.exit_code,
                run_dir=report.run_dir,
                against=reference[0] if reference else None,
            )
        self.trials.append(trial)
        if trial.outcome != "interrupted" and not key[0]:
            self._done[key] = trial
        if self.on_trial is not None:
            self.on_trial(trial)
        return trial
