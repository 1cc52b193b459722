"""Runs one trial: apply a change set to the command, launch it, classify the outcome.

Results are cached per change set (a set is never launched twice in a session, except the
confirmation re-run) and can be seeded with stored trials, which is how ``fix --resume``
replays an interrupted session without relaunching what already ran.

With a :class:`BatchLauncher` (``fix --parallel``), :meth:`TrialRunner.prefetch` launches
several change sets side by side ahead of the planner asking for them; their reports wait,
keyed by change set, until :meth:`TrialRunner.run` is called for each. What a trial *means*
(its outcome against a reference) is decided only then, in the planner's order. A report of
a server killed by SIGKILL while side by side (the kernel's OOM killer: the trials share
host memory) is not read: that change set is launched again, alone.
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
    BatchLauncher,
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


#: How a server killed from outside ends (SIGKILL: the kernel's OOM killer, above all).
_KILLED = -9


def _crowded_out(report: LaunchReport) -> bool:
    """Did a trial launched side by side die of something its neighbours may have caused?
    Servers that share a host share its memory: one that sizes its cache to the free memory
    gets OOM-killed next to another, though alone it is healthy. Such a result is not read;
    the change set is launched again, alone."""
    return report.outcome == "failed" and report.exit_code == _KILLED


class TrialRunner:
    def __init__(
        self,
        command: CommandLike,
        launcher: Launcher,
        *,
        stored: Iterable[Trial] = (),
        on_trial: Callable[[Trial], None] | None = None,
        overlays: Overlays | None = None,
        batch: BatchLauncher | None = None,
    ) -> None:
        self.command = command
        self.launcher = launcher
        self.overlays = overlays  # package changes run in overlays; without: not runnable
        self.on_trial = on_trial
        self.batch = batch
        self.trials: list[Trial] = []
        self.launched = 0
        self._done: dict[Key, Trial] = {}
        self._ready: dict[Key, LaunchReport] = {}  # launched ahead, not yet asked for
        self.relaunched = 0  # side-by-side launches killed from outside, run again alone
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

    @property
    def width(self) -> int:
        """How many trials can run at once."""
        return self.batch.width if self.batch is not None else 1

    def waiting(self, changes: Sequence[Change]) -> bool:
        """Was this change set launched ahead and its report not yet taken?"""
        return self._key("candidate", changes) in self._ready

    @property
    def unused(self) -> int:
        """Trials launched ahead that the planner never asked for (the search ended first)."""
        return len(self._ready)

    def prefetch(self, batch: Sequence[Sequence[Change]]) -> None:
        """Launch these change sets side by side; each report waits for :meth:`run`."""
        if self.batch is None:
            return
        jobs: list[tuple[Key, list[str], dict[str, str]]] = []
        for changes in batch:
            key = self._key("candidate", changes)
            if key in self._done or key in self._ready or self._stored.get(key):
                continue
            argv, env, unbuilt = self._prepare(changes)
            if unbuilt is None:  # an overlay that cannot be built: run() says why
                jobs.append((key, argv, env))
        if not jobs:
            return
        reports = self.batch.run_all([(argv, env) for _, argv, env in jobs])
        self.launched += len(jobs)
        for (key, _, _), report in zip(jobs, reports, strict=True):
            if report.outcome != "interrupted":  # asked for later, it is launched again
                self._ready[key] = report

    def _prepare(
        self, changes: Sequence[Change]
    ) -> tuple[list[str], dict[str, str], LaunchReport | None]:
        """The argv and environment of a change set, and the report of an overlay that
        could not be built (no index, no such version: a reason, not a failure)."""
        cmd = self.command
        for change in changes:
            if change.kind != "package":
                cmd = cmd.apply(change)
        argv, env = cmd.render(), dict(cmd.env)
        packages = [c for c in changes if c.kind == "package"]
        try:
            if packages and self.overlays is not None:
                env = self.overlays.environment(packages, env, os.environ)
        except OverlayError as exc:
            unbuilt = Diagnosis("", None, None, None, None, str(exc), rules=(NO_OVERLAY,))
            return argv, env, LaunchReport("failed", unbuilt, 0.0)
        return argv, env, None

    def _launch(
        self, key: Key, changes: Sequence[Change]
    ) -> tuple[list[str], dict[str, str], LaunchReport]:
        argv, env, unbuilt = self._prepare(changes)
        if unbuilt is not None:
            return argv, env, unbuilt
        if not key[0] and key in self._ready:
            report = self._ready.pop(key)
            if not _crowded_out(report):
                return argv, env, report
            self.relaunched += 1  # killed from outside while side by side: try it alone
        self.launched += 1
        return argv, env, self.launcher(argv, env)

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
            argv, env, report = self._launch(key, changes)
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
                placement=report.placement,
            )
        self.trials.append(trial)
        if trial.outcome != "interrupted" and not key[0]:
            self._done[key] = trial
        if self.on_trial is not None:
            self.on_trial(trial)
        return trial
