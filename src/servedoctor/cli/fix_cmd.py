"""``servedoctor fix -- CMD``: find the smallest change that makes a failing server work."""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.text import Text

from servedoctor.cli import findings_cmd  # noqa: F401  (registers `findings`)
from servedoctor.cli.app import app, err, out
from servedoctor.config import (
    default_request_timeout,
    default_runs_dir,
    default_startup_timeout,
    default_store,
)
from servedoctor.env.serverenv import ServerPython, resolve_python
from servedoctor.errors import UserError
from servedoctor.experiments.candidates import Candidate, build_candidates
from servedoctor.experiments.command import CommandLike, parse
from servedoctor.experiments.durations import expected_seconds
from servedoctor.experiments.envhistory import env_diff, remember_healthy
from servedoctor.experiments.fingerprint import current_fingerprint
from servedoctor.experiments.launching import (
    DisplayFactory,
    TrialLaunchOptions,
    supervised_launcher,
)
from servedoctor.experiments.overlay import Overlays
from servedoctor.experiments.planner import FixResult, PlanEvent, Planner
from servedoctor.experiments.runner import TrialRunner
from servedoctor.experiments.trial import Trial
from servedoctor.findings.store import FindingsStore, StoredRun
from servedoctor.findings.working import WorkingCommand, working_command
from servedoctor.knowledge.registry import default_registry
from servedoctor.launch.process import check_command
from servedoctor.model import Change
from servedoctor.redact import MASK, redact_argv, redact_env, redact_url
from servedoctor.remote.launching import remote_fingerprint, remote_note
from servedoctor.remote.url import SshTarget

if TYPE_CHECKING:
    from servedoctor.experiments.parallel import RayTrials

_OUTCOME_STYLE = {
    "healthy": "bold green",
    "failed": "red",
    "same_failure": "red",
    "different_failure": "yellow",
    "rejected": "magenta",
    "interrupted": "magenta",
}


def _say(console: Console, *parts: str | tuple[str, str]) -> None:
    """Print plain text (never parsed as markup: it holds user and log text)."""
    console.print(Text.assemble(*parts), highlight=False, soft_wrap=True)


def _describe(changes: tuple[Change, ...] | list[Change]) -> str:
    return " + ".join(c.describe() for c in changes) or "(the command as given)"


def _failure(trial: Trial) -> str:
    if trial.healthy:
        return ""
    d = trial.diagnosis
    if d is None or not (d.error_class or d.summary):
        return f"exit {trial.exit_code}" if trial.exit_code is not None else ""
    label = "/".join(x for x in (d.error_class, d.phase) if x)
    return f"{label}: {d.summary}" if d.summary else label


class _Printer:
    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.n = 0
        self.title = ""  # the running trial, for its live display

    def __call__(self, event: PlanEvent) -> None:
        if self.quiet:
            return
        if event.kind == "start":
            what = event.tested.describe() if event.tested else _describe(event.changes)
            if event.role == "baseline":
                what = "the command as given"
            kept = [c for c in event.changes if c != event.tested]
            if event.tested is not None and kept:
                what += f"  (on top of {_describe(kept)})"
            _say(err, (f"trial {self.n}", "bold"), f" {event.role}: {what}")
            self.title = f"trial {self.n} {event.role}"
            if event.why and event.role == "candidate":
                _say(err, (f"  why: {event.why}", "dim"))
            if event.role in ("combine", "minimise") and len(event.changes) > 1:
                _say(err, (f"  changes: {_describe(event.changes)}", "dim"))
            return
        trial = event.trial
        assert trial is not None
        self.n += 1
        style = _OUTCOME_STYLE.get(trial.outcome, "")
        outcome = trial.outcome.replace("_", " ")
        failure = _failure(trial)
        _say(
            err,
            "  → ",
            (outcome, style),
            f" in {trial.duration_s:.1f} s" + (f"  {failure}" if failure else ""),
        )
        if event.role != "baseline":
            _say(err, (f"  {event.left} candidates left", "dim"))


def _trial_display(fs: FindingsStore, cmd: CommandLike, printer: _Printer) -> DisplayFactory:
    """Each trial's live display: launch's panel, titled with the trial, with the time a
    healthy run of this server took before."""
    from servedoctor.launch.display import LiveDisplay

    def display() -> LiveDisplay:
        try:  # asked per trial: a trial healthy earlier in this session counts too
            expected = expected_seconds(fs, cmd)
        except Exception:  # a courtesy figure: never let it stop the session
            expected = None
        return LiveDisplay(err, title=printer.title, expected_s=expected)

    return display


def _print_plan(cands: list[Candidate], json_out: bool) -> None:
    if json_out:
        out.print_json(json.dumps({"plan": [c.to_dict() for c in cands]}))
        return
    _say(out, f"{len(cands)} candidate changes, in the order fix would try them:")
    for i, c in enumerate(cands, 1):
        tail = "" if c.runnable else "  (a package change with no version to try: not tried)"
        _say(
            out,
            f"{i:3d}. {c.change.describe():40s} prior {c.prior:.2f}  cost {c.cost_s:5.1f} s"
            f"  [{c.source}{' ' + c.rule if c.rule else ''}] {c.why}{tail}",
        )


def _parallel_trials(
    options: TrialLaunchOptions,
    cmd: CommandLike,
    width: int,
    address: str | None,
    forced: bool,
) -> RayTrials | None:
    """The Ray pool of ``fix --parallel`` (None for one trial at a time and no ``--ray``)."""
    if width == 1 and not forced:
        return None
    from servedoctor.experiments.parallel import RayTrials, gpus_per_trial

    return RayTrials(options, width=width, address=address, gpus=gpus_per_trial(cmd.render()))


def _refuse_remote(parallel: int, ray_address: str | None, python_path: Path | None) -> None:
    """What ``--on`` cannot be combined with: one line each."""
    if parallel > 1 or ray_address is not None:
        raise UserError("--parallel and --ray run trials on this host's Ray: not with --on")
    if python_path is not None:
        raise UserError("--python names a local interpreter; with --on the server runs remotely")


def _fingerprint(engine: str, remote: SshTarget | None) -> dict[str, Any]:
    return current_fingerprint(engine) if remote is None else remote_fingerprint(engine, remote)


#: Sessions that ended: nothing is left to resume in them.
FINISHED = ("fixed", "not_fixed")


def _resume_target(store: FindingsStore, run_id: int | None) -> StoredRun:
    run = store.run(run_id) if run_id is not None else store.latest_unfinished()
    if run is None:
        raise UserError("nothing to resume: no unfinished fix session in the store")
    if run.status in FINISHED:
        raise UserError(
            f"session {run.id} already finished ({run.status.replace('_', ' ')}); "
            "start a new one: servedoctor fix -- CMD ..."
        )
    return run


def _same_command(given: Sequence[str], stored: StoredRun) -> bool:
    """Is the command given again the stored one (compared as stored: redacted)?"""
    cmd = parse(list(given))
    return redact_argv(cmd.render()) == list(stored.argv) and redact_env(dict(cmd.env)) == dict(
        stored.env
    )


@app.command(
    "fix",
    context_settings={"allow_interspersed_args": False},
)
def fix(
    command: list[str] = typer.Argument(None, metavar="-- CMD...", help="the server command"),
    store: str | None = typer.Option(
        ...,
        "--store",
        default_factory=default_store,
        help="findings store: a path (SQLite) or a SQLAlchemy URL",
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="print the plan, launch nothing"),
    max_trials: int = typer.Option(12, "--max-trials", min=1, help="trials after the baseline"),
    budget_minutes: float | None = typer.Option(None, "--budget-minutes", min=0.1),
    json_out: bool = typer.Option(False, "--json", help="one JSON object at the end"),
    resume: bool = typer.Option(False, "--resume", help="resume an interrupted fix session"),
    run_id: int | None = typer.Option(None, "--run", help="which stored session to resume"),
    log: Path | None = typer.Option(
        None, "--log", help="a failure log of this command: used instead of a baseline launch"
    ),
    prompt: str = typer.Option("Say hello in one sentence.", "--prompt"),
    max_tokens: int = typer.Option(16, "--max-tokens", min=1),
    request_timeout: float = typer.Option(
        ..., "--request-timeout", min=0.1, default_factory=default_request_timeout
    ),
    expect: str | None = typer.Option(None, "--expect", help="regex the smoke reply must match"),
    startup_timeout: float | None = typer.Option(
        ..., "--startup-timeout", min=1, default_factory=default_startup_timeout
    ),
    runs_dir: Path = typer.Option(
        ..., "--runs-dir", default_factory=default_runs_dir, help="where trial runs go"
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no per-trial lines"),
    packages: bool = typer.Option(
        True,
        "--packages/--no-packages",
        help="try package versions (transformers ==4.57.1) in an overlay of the server's "
        "environment, never in it",
    ),
    no_report: bool = typer.Option(
        False, "--no-report", help="do not write the session's HTML report"
    ),
    python_path: Path | None = typer.Option(
        None, "--python", help="the server's Python (default: the one the command runs)"
    ),
    parallel: int = typer.Option(
        1,
        "--parallel",
        min=1,
        help="run up to N independent trials at once, each on its own GPUs and port, "
        "through Ray (same verdicts, less wall time)",
    ),
    ray_address: str | None = typer.Option(
        None,
        "--ray",
        metavar="ADDRESS",
        help="the Ray cluster --parallel uses (default: a local one on loopback for the session)",
    ),
    on: str | None = typer.Option(
        None,
        "--on",
        help="run every trial on a remote host through ssh: ssh://[user@]host[:port] "
        "(flag and env trials only)",
    ),
) -> None:
    """Find the smallest change (flags, env vars, package versions) that makes a failing
    server healthy.

    One change per trial, likeliest and cheapest first; every trial goes into the findings
    store. Exit 0 when fixed, 1 when not, 130 when interrupted (resume with --resume).
    """
    from servedoctor.remote import parse_target

    remote = None if on is None else parse_target(on)
    options = TrialLaunchOptions(
        prompt=prompt,
        max_tokens=max_tokens,
        request_timeout=request_timeout,
        expect=expect,
        startup_timeout=startup_timeout,
        runs_dir=runs_dir,
        on=remote,
    )
    argv = list(command or [])

    if dry_run:
        cmd = parse(argv)
        from servedoctor.diagnose import diagnose_path
        from servedoctor.model import Diagnosis

        if log is not None and not log.is_file():
            raise UserError(f"no such log file: {log}")
        diagnosis = (
            diagnose_path(log, command_flags={**cmd.settings(), **cmd.env})
            if log is not None
            else Diagnosis("", None, None, None, None, "no failure log given (--log)")
        )
        fs = FindingsStore.open(store)
        fp = _fingerprint(cmd.engine, remote)
        cands = build_candidates(
            diagnosis=diagnosis,
            command=cmd,
            base_cost_s=30.0,
            history=fs.history(fp, diagnosis.error_class),
            packages=packages and remote is None,
        )
        if not json_out:
            _say(out, f"dry run: {cmd.engine} · {' '.join(redact_argv(cmd.render()))}")
            if diagnosis.error_class:
                _say(
                    out, f"failure: {diagnosis.error_class}/{diagnosis.phase}: {diagnosis.summary}"
                )
        _print_plan(cands, json_out)
        return

    fs = FindingsStore.open(store)
    stored: list[Trial] = []
    if resume:
        target = _resume_target(fs, run_id)
        if not argv:
            argv = list(target.argv)
            if any(MASK in a for a in argv) or any(MASK in v for v in target.env.values()):
                raise UserError(
                    f"session {target.id}'s command had secrets redacted; give it again: "
                    "servedoctor fix --resume -- CMD..."
                )
            env_prefix = [f"{k}={v}" for k, v in target.env.items()]
            argv = [*env_prefix, *argv]
        elif not _same_command(argv, target):
            raise UserError(
                f"session {target.id} was started with another command; resume it without "
                "one, or start a new session for this command"
            )
        options = TrialLaunchOptions.from_dict(target.options)
        if remote is not None and options.on != remote:
            raise UserError(
                f"session {target.id} did not run on {remote.url}; resume it without --on"
            )
        remote = options.on
        stored = list(target.trials)
        session_id = target.id
        fs.reopen(session_id)
    cmd = parse(argv)
    server: ServerPython | None = None
    if remote is None:
        check_command(cmd.render())  # a command that does not exist is a usage error, not a trial
        server = resolve_python(cmd.render(), python_path, dict(cmd.env))  # bad --python: 1 line
    else:  # the command, its Python and its port can only be checked there
        _refuse_remote(parallel, ray_address, python_path)
        packages = False
    default_registry()  # a broken rule file is one line now, before any trial starts
    from servedoctor.launch.supervisor import check_port_free

    pool = _parallel_trials(options, cmd, parallel, ray_address, ray_address is not None)
    if pool is None:  # through Ray every trial gets a free port of its own
        if remote is None:  # a remote port is only seen taken there, by the first trial
            check_port_free(cmd.render())  # a taken port: one line, before the session starts
    elif "CUDA_VISIBLE_DEVICES" in cmd.env:
        raise UserError("--parallel gives each trial its own GPUs: drop CUDA_VISIBLE_DEVICES")
    else:
        pool.__enter__()  # a cluster that cannot start: one line, before the session starts
    fingerprint = _fingerprint(cmd.engine, remote)
    printer = _Printer(quiet or json_out)
    launcher = pool or supervised_launcher(
        options, display=None if printer.quiet else _trial_display(fs, cmd, printer)
    )
    if not resume:
        session_id = fs.start_run(
            engine=cmd.engine,
            argv=cmd.render(),
            env=dict(cmd.env),
            options=options.to_dict(),
            fingerprint=fingerprint,
        )

    baseline: Trial | None = None
    if log is not None and not stored:
        from servedoctor.diagnose import diagnose_path

        if not log.is_file():
            raise UserError(f"no such log file: {log}")
        baseline = Trial(
            index=0,
            role="baseline",
            changes=(),
            tested=None,
            why=f"failure log {log}",
            argv=tuple(cmd.render()),
            env=dict(cmd.env),
            outcome="failed",
            diagnosis=diagnose_path(log, command_flags={**cmd.settings(), **cmd.env}),
            duration_s=30.0,
            run_dir=str(log.parent),
        )

    def keep(trial: Trial) -> None:
        if not trial.replayed:
            fs.add_trial(session_id, trial)

    python = server.path if server is not None else ""
    if remote is not None and not (quiet or json_out):
        _say(err, (remote_note(remote), "dim"))
    elif server is not None and (warning := server.warning()) and not (quiet or json_out):
        err.print(f"warning: {warning}", highlight=False, markup=False, soft_wrap=True)
    overlays = Overlays(python) if packages else None
    if overlays is not None:
        overlays.prune()  # overlays unused for a month, builds a dead session left
    moved_env = env_diff(fs, cmd, python) if packages else None
    moved = moved_env.changes() if moved_env else []
    if moved_env and not (quiet or json_out):
        err.print("since it last worked: " + ", ".join(moved_env.lines(limit=8)), highlight=False)
    runner = TrialRunner(cmd, launcher, stored=stored, on_trial=keep, overlays=overlays, batch=pool)
    planner = Planner(
        cmd,
        runner,
        history=lambda cls: fs.history(fingerprint, cls, exclude_run=session_id),
        max_trials=max_trials,
        budget_s=None if budget_minutes is None else budget_minutes * 60,
        on_event=printer,
        baseline=baseline,
        moved=moved,
        moved_aliases=moved_env.aliases if moved_env else None,
    )
    if not (quiet or json_out):
        err.print(
            f"servedoctor fix: {cmd.engine} · session {session_id} · store {redact_url(fs.url)}"
            + (f" · resuming after {len(stored)} stored trials" if stored else ""),
            highlight=False,
        )
    started = time.monotonic()
    if pool is not None and not (quiet or json_out):
        err.print(f"trials run {parallel} at a time on {pool.where}", highlight=False)
    try:
        result = planner.run()
    except UserError as exc:  # found by a trial (a remote command that does not exist)
        fs.finish_run(session_id, status="not_fixed", reason=str(exc), fix=(),
                      trials=tuple(runner.trials))  # fmt: skip
        raise
    except KeyboardInterrupt:
        result = FixResult("not_fixed", (), tuple(runner.trials), "interrupted", interrupted=True)
    finally:
        if pool is not None:
            pool.close()
    status = "interrupted" if result.interrupted else result.outcome
    if result.outcome == "fixed" and remote is None:  # the remote packages are not read
        remember_healthy(fs, cmd, python, result.changes)
    fs.finish_run(
        session_id, status=status, reason=result.reason, fix=result.changes, trials=result.trials
    )
    elapsed = time.monotonic() - started

    works = (
        working_command(cmd.render(), dict(cmd.env), result.changes)
        if result.outcome == "fixed"
        else None
    )
    if works is not None:  # what is shown or printed never carries a secret
        works = WorkingCommand(redact_argv(works.argv), redact_env(works.env), works.packages)
    if json_out:
        data = {"session": session_id, **result.to_dict(), "elapsed_s": round(elapsed, 2)}
        if pool is not None:
            data["parallel"] = {"width": parallel, "launched": runner.launched,
                                "unused": runner.unused,
                                "relaunched": runner.relaunched}  # fmt: skip
        if works is not None:
            where_to = {"on": remote.url} if remote is not None else {}
            data["command"] = {**works.to_dict(), **where_to}
        out.print_json(json.dumps(data))
    elif result.outcome == "fixed":
        n = sum(1 for t in result.trials if t.role != "baseline")
        plural = "s" if len(result.changes) != 1 else ""
        needed = "it is needed" if len(result.changes) == 1 else "each one is needed"
        _say(
            out,
            ("fixed", "bold green"),
            f": {_describe(result.changes)}  ({len(result.changes)} change{plural}, "
            f"{needed}; {n} trials, {elapsed:.0f} s)",
        )
        if works is not None:
            where = f" on {remote.url}" if remote is not None else ""
            _say(out, (f"the command that works{where}:", "bold"))
            for line in works.lines():
                _say(out, "  " + line)
    else:
        _say(out, ("not fixed", "bold red"), f": {result.reason}")
    if pool is not None and runner.unused and not json_out:
        _say(err, (f"{runner.unused} trials launched ahead were not needed", "dim"))
    for note in pool.notes if pool is not None else []:
        _say(err, ("warning: ", "yellow"), note)
    if not no_report:
        from servedoctor.cli.report_cmd import report_after_session

        report_after_session(fs, session_id)
    if result.interrupted:
        where = f" --store {shlex.quote(redact_url(store))}" if store else ""
        err.print(
            f"interrupted: resume with  servedoctor fix --resume{where} --run {session_id}",
            highlight=False,
        )
        raise typer.Exit(130)
    raise typer.Exit(0 if result.outcome == "fixed" else 1)
