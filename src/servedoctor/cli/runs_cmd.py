"""``servedoctor runs``: list launch runs; ``runs show ID|last``; ``runs clean --older-than``."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import typer

from servedoctor.cli.app import app, out
from servedoctor.errors import UserError

runs_app = typer.Typer(
    help="List, show and clean the run folders launch and fix leave behind.",
    no_args_is_help=False,
    invoke_without_command=True,
)
app.add_typer(runs_app, name="runs")

_RUNS_DIR_HELP = (
    "the runs folder (default: $SERVEDOCTOR_RUNS_DIR, the config file, "
    "else ~/.local/state/servedoctor/runs)"
)
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def _say(text: str) -> None:
    out.print(text, highlight=False, markup=False, soft_wrap=True)


def _runs_dir(ctx: typer.Context, given: Path | None) -> Path:
    """``--runs-dir`` of the subcommand, else of ``runs``, else the configured default."""
    if given is None and isinstance(ctx.obj, Path):
        given = ctx.obj
    if given is None:
        from servedoctor.config import default_runs_dir

        given = default_runs_dir()
    return Path(os.path.abspath(given.expanduser()))


def _when(started_at: str | None) -> str:
    if not started_at:
        return "-"
    try:
        return datetime.fromisoformat(started_at).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    except ValueError:
        return started_at


def _secs(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def parse_age(text: str) -> float:
    """``7d``, ``12h``, ``30m``, ``2w``, ``90s`` (or ``1d12h``) → seconds."""
    parts = re.findall(r"(\d+(?:\.\d+)?)([smhdw])", text.strip().lower())
    if not parts or "".join(n + u for n, u in parts) != text.strip().lower():
        raise UserError(f"--older-than wants an age such as 7d, 12h, 30m or 2w, got {text!r}")
    return sum(float(n) * _UNITS[u] for n, u in parts)


def _outcome(run: Any, stale: set[Path]) -> str:
    outcome = str(run.outcome or "?")
    return "abandoned" if outcome == "running" and run.path in stale else outcome


@runs_app.callback()
def runs_list(
    ctx: typer.Context,
    runs_dir: Path | None = typer.Option(None, "--runs-dir", help=_RUNS_DIR_HELP),
    json_out: bool = typer.Option(False, "--json", help="one JSON object per line (JSON Lines)"),
    limit: int | None = typer.Option(None, "--limit", min=1, help="show the newest N only"),
) -> None:
    """List runs, newest first: id, time, engine, outcome, phase reached, duration, path."""
    ctx.obj = runs_dir
    if ctx.invoked_subcommand is not None:
        return
    from servedoctor.launch.record import list_runs
    from servedoctor.launch.stale import find_stale_runs

    where = _runs_dir(ctx, runs_dir)
    runs = list_runs(where)[:limit]
    stale = {Path(os.path.abspath(s.run_dir)) for s in find_stale_runs(where, mark=False)}
    if json_out:
        for run in runs:
            data = {**run.to_dict(), "outcome": _outcome(run, stale)}
            _say(json.dumps(data, ensure_ascii=False))
        return
    if not runs:
        _say(f"no runs yet in {where}")
        return
    rows = [
        (
            run.id,
            _when(run.started_at),
            run.engine or "?",
            _outcome(run, stale),
            run.phase or "-",
            _secs(run.duration_s),
            str(run.path),
        )
        for run in runs
    ]
    head = ("id", "started", "engine", "outcome", "phase", "duration", "path")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head) - 1)]
    for row in [head, *rows]:
        cells = [c.ljust(w) for c, w in zip(row[:-1], widths, strict=True)]
        _say("  ".join([*cells, row[-1]]))


@runs_app.command("show")
def runs_show(
    ctx: typer.Context,
    ref: str = typer.Argument(..., metavar="ID|last", help="a run id, its folder, or last"),
    runs_dir: Path | None = typer.Option(None, "--runs-dir", help=_RUNS_DIR_HELP),
    json_out: bool = typer.Option(False, "--json", help="print run.json as one JSON object"),
) -> None:
    """Print one run's record: command, phases, outcome, failure and diagnosis."""
    from servedoctor.launch.record import find_run, read_record, summarise

    path = find_run(ref, _runs_dir(ctx, runs_dir))
    record = read_record(path)
    if json_out:
        _say(json.dumps(record, ensure_ascii=False))
        return
    run = summarise(path, record)
    _say(f"run       {run.id}")
    _say(f"folder    {run.path}")
    _say(
        f"started   {_when(run.started_at)} · {run.engine or '?'} · {run.outcome or '?'}"
        f" · {_secs(run.duration_s)}"
    )
    command = record.get("command")
    if isinstance(command, list):
        import shlex

        env = record.get("env_overrides")
        prefix = [f"{k}={v}" for k, v in env.items()] if isinstance(env, dict) else []
        _say(f"command   {shlex.join([*prefix, *map(str, command)])}")
    if record.get("endpoint"):
        _say(f"endpoint  {record['endpoint']}")
    phases = record.get("phases")
    if isinstance(phases, list) and phases:
        _say("phases")
        for p in phases:
            if not isinstance(p, dict):
                continue
            end = p.get("end")
            span = f"{p.get('start', 0):7.2f} – " + ("…" if end is None else f"{end:.2f}")
            _say(f"  {p.get('name', '?'):<14} {p.get('label', ''):<22} {span}")
    for kind in ("smoke", "liveness"):
        probe = record.get(kind)
        if isinstance(probe, dict):
            mark = "ok" if probe.get("ok") else "failed"
            extra = f" — {probe['error']}" if probe.get("error") else ""
            _say(f"{kind:<9} {mark}, {probe.get('tokens', 0)} tokens{extra}")
    failure = record.get("failure")
    if isinstance(failure, dict):
        _say(
            f"failure   {failure.get('kind')} in {failure.get('phase')} at "
            f"{failure.get('at_s', 0)} s — {failure.get('detail', '')}"
        )
    if record.get("exit_code") is not None:
        _say(f"exit      {record['exit_code']}")
    if record.get("outcome_detail"):
        _say(f"note      {record['outcome_detail']}")
    _show_diagnosis(record.get("diagnosis"))
    _say(f"log       {run.path / 'server.log'}")


def _show_diagnosis(diagnosis: object) -> None:
    if not isinstance(diagnosis, dict):
        _say("diagnosis none recorded")
        return
    label = " · ".join(
        str(diagnosis.get(k)) for k in ("error_class", "phase", "component") if diagnosis.get(k)
    )
    _say(f"diagnosis {label or 'no failure found'}")
    if diagnosis.get("summary"):
        _say(f"  {diagnosis['summary']}")
    hypotheses = diagnosis.get("hypotheses")
    if isinstance(hypotheses, list) and hypotheses:
        _say("hypotheses")
        for i, h in enumerate(hypotheses, 1):
            if not isinstance(h, dict):
                continue
            changes = h.get("changes") or []
            change = ", ".join(_change(c) for c in changes if isinstance(c, dict))
            tail = f" → try {change}" if change else ""
            _say(f"  {i}. ({h.get('confidence', 0):.2f}) {h.get('cause', '')}{tail}")


def _change(c: dict[str, Any]) -> str:
    from servedoctor.model import Change

    try:
        return Change(c["kind"], c["name"], c.get("value")).describe()
    except (KeyError, TypeError):
        return str(c)


@runs_app.command("clean")
def runs_clean(
    ctx: typer.Context,
    older_than: str = typer.Option(..., "--older-than", help="age, e.g. 7d, 12h, 30m, 2w"),
    runs_dir: Path | None = typer.Option(None, "--runs-dir", help=_RUNS_DIR_HELP),
    dry_run: bool = typer.Option(False, "--dry-run", help="say what would go, remove nothing"),
) -> None:
    """Remove run folders older than --older-than. A run still running (its supervisor
    alive, or a server an abandoned run left behind) is kept."""
    from servedoctor.launch.record import list_runs
    from servedoctor.launch.stale import find_stale_runs

    age = parse_age(older_than)
    where = _runs_dir(ctx, runs_dir)
    # runs whose supervisor is gone are marked abandoned first (as launch does)
    stale_runs = find_stale_runs(where, mark=not dry_run)
    stale = {Path(os.path.abspath(s.run_dir)) for s in stale_runs}
    left_alive = {Path(os.path.abspath(s.run_dir)) for s in stale_runs if s.server_pids}
    cutoff = time.time() - age
    removed = kept = 0
    freed = 0
    for run in list_runs(where):
        if run.ended > cutoff:
            continue
        running = run.outcome == "running" and run.path not in stale
        if running or run.path in left_alive:
            kept += 1
            continue
        size = _disk_usage(run.path)
        if not dry_run:
            try:
                shutil.rmtree(run.path)
            except OSError as exc:
                raise UserError(f"cannot remove {run.path}: {exc.strerror or exc}") from None
        removed += 1
        freed += size
    verb = "would remove" if dry_run else "removed"
    noun = "run" if removed == 1 else "runs"
    line = f"{verb} {removed} {noun} older than {older_than} from {where}, "
    line += f"{'would free' if dry_run else 'freed'} {_size(freed)}"
    if kept:
        line += f"; kept {kept} still running"
    _say(line)


def _disk_usage(path: Path) -> int:
    """Bytes in the folder's files (symbolic links are not followed)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total
