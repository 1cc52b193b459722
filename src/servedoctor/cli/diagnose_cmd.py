"""``servedoctor diagnose`` and ``servedoctor eval``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from servedoctor.cli.app import app, err, fail, out
from servedoctor.diagnose import diagnose_path
from servedoctor.diagnose.evaluate import FIELDS, evaluate
from servedoctor.engines import all_engines
from servedoctor.errors import UserError
from servedoctor.model import Diagnosis
from servedoctor.report.terminal import render

if TYPE_CHECKING:
    from servedoctor.experiments.envhistory import Remembered

_RUN_ID = re.compile(r"^\d{8}-\d{6}")  # the name make_run_dir gives a run folder


def _engine_choice(value: str) -> str:
    if value != "auto" and value not in all_engines():
        raise typer.BadParameter(f"choose auto or one of: {', '.join(sorted(all_engines()))}")
    return value


@app.command("diagnose")
def diagnose(
    logs: Annotated[
        list[str],
        typer.Argument(
            help="Log files to diagnose; - reads stdin; a run folder, a run id or 'last' "
            "diagnoses that run's server.log with what its run.json recorded."
        ),
    ],
    json_: Annotated[bool, typer.Option("--json", help="Print JSON Lines, one per file.")] = False,
    engine: Annotated[
        str, typer.Option(help="Server that wrote the log.", callback=_engine_choice)
    ] = "auto",
    arch: Annotated[
        str | None, typer.Option(help="GPU architecture, e.g. sm_120, for arch conditions.")
    ] = None,
    engine_version: Annotated[
        str | None,
        typer.Option(
            help="The server's version, to spell changes for it (default: from the log, "
            "else the latest release servedoctor knows)."
        ),
    ] = None,
    runs_dir: Annotated[
        Path | None,
        typer.Option(
            "--runs-dir",
            help="where 'last' and run ids are looked up (default: $SERVEDOCTOR_RUNS_DIR, "
            "the config file, else ~/.local/state/servedoctor/runs)",
        ),
    ] = None,
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            help="findings store for a run's environment diff against its last healthy "
            "launch (default: as fix)",
        ),
    ] = None,
    python: Annotated[
        Path | None,
        typer.Option("--python", help="a run's server Python (default: what it ran)"),
    ] = None,
) -> None:
    """Say what failed in a server log, when, where, and what one change would test it.

    Exit 0: no failure found; 1: a failure diagnosed; 2: bad input.
    """
    bad = failed = False
    for log in logs:
        since: Remembered | None = None
        try:
            run_dir = _run_folder(log, runs_dir)
            if run_dir is not None:
                from servedoctor.launch.record import diagnose_recorded

                diagnosis: Diagnosis = diagnose_recorded(
                    run_dir, engine=engine, arch=arch, engine_version=engine_version
                )
                since = _since_healthy(run_dir, diagnosis, store, python)
                if since is not None and since.diagnosis is not None:
                    diagnosis = since.diagnosis
            else:
                diagnosis = diagnose_path(
                    log, engine=engine, arch=arch, engine_version=engine_version
                )
        except UserError as exc:
            err.print(f"[bold red]servedoctor:[/] {exc}", highlight=False)
            bad = True
            continue
        failed = failed or diagnosis.failed
        if json_:
            out.print(
                json.dumps(diagnosis.to_dict(), ensure_ascii=False),
                soft_wrap=True,
                highlight=False,
                markup=False,
            )
        else:
            render(diagnosis, out, with_context=log != "-")
            for line in since.lines() if since else []:
                out.print(line, highlight=False, soft_wrap=True, markup=False)
    raise typer.Exit(2 if bad else 1 if failed else 0)


def _since_healthy(
    run_dir: Path, diagnosis: Diagnosis, store: str | None, python: Path | None
) -> Remembered | None:
    """A failed run's environment compared with the last healthy launch of the same server:
    the moved packages as hypotheses (None for a healthy run or one without a command)."""
    from servedoctor.config import default_store
    from servedoctor.env.serverenv import resolve_python
    from servedoctor.experiments.envhistory import remember_run
    from servedoctor.launch.record import read_record

    argv = read_record(run_dir).get("command")
    if not diagnosis.failed or not isinstance(argv, list) or not argv:
        return None
    server = resolve_python([str(a) for a in argv], python)
    store = store if store is not None else default_store()
    return remember_run(store, [str(a) for a in argv], server.path, healthy=False,
                        diagnosis=diagnosis)  # fmt: skip


def _run_folder(arg: str, runs_dir: Path | None) -> Path | None:
    """The run folder ``arg`` names (a folder, ``last``, or a run id such as
    ``20261201-141352-vllm``), or None for a log file."""
    path = Path(arg)
    if arg == "-" or path.is_file():
        return None
    if not path.is_dir() and arg != "last" and not _RUN_ID.match(arg):
        return None  # a missing file: diagnose_path says so
    from servedoctor.config import default_runs_dir
    from servedoctor.launch.record import find_run

    return find_run(arg, runs_dir if runs_dir is not None else default_runs_dir())


@app.command("eval")
def eval_(
    corpus: Annotated[Path, typer.Argument(help="Folder of cases: <case>/case.yaml + log.txt.")],
    json_: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Score the diagnosis on a labelled corpus: per-field accuracy and the misses."""
    if not corpus.exists():
        raise fail(f"{corpus}: no such directory")
    score = evaluate(corpus)
    if json_:
        out.print(json.dumps(score.to_dict()), soft_wrap=True, highlight=False, markup=False)
        return
    if score.misses:
        misses = Table(title="Misses", box=None, header_style="bold")
        for column in ("case", "field", "expected", "got"):
            misses.add_column(column)
        for m in score.misses:
            misses.add_row(m.case, m.field, str(m.expected), str(m.got))
        out.print(misses)
    for line in score.errors:
        out.print(f"[red]error[/] {line}")
    out.print(f"cases: {score.cases}")
    for name in FIELDS:
        acc = score.accuracy(name)
        shown = "n/a" if acc is None else f"{acc:.3f}"
        out.print(f"{name:<12} {shown}  ({score.correct[name]}/{score.scored[name]})")
    if score.fixes:
        out.print(f"{'fix@3':<12} {score.fix_at_3():.3f}  ({score.fixed_at_3}/{score.fixes})")
    if score.flags_proposed:
        valid = score.flags_valid / score.flags_proposed
        out.print(f"{'flags valid':<12} {valid:.3f}  ({score.flags_valid}/{score.flags_proposed})")
        if score.flags_unstated:
            out.print(
                f"{'':<12} {score.flags_unstated} more spelled for the latest release "
                "(the log states none; the thread names an older one)"
            )
    if score.failures:
        share = score.with_change / score.failures
        out.print(f"{'with change':<12} {share:.3f}  ({score.with_change}/{score.failures})")
