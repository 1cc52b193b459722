"""``servedoctor report RUN_DIR|ID|last`` and ``report --session N``: one HTML page to share.

``launch`` and ``fix`` write the same page at their end (``--no-report`` skips it) through
:func:`report_after_run` and :func:`report_after_session`.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import typer

from servedoctor.cli.app import app, err, out
from servedoctor.config import default_runs_dir, default_store
from servedoctor.errors import UserError
from servedoctor.findings.store import FindingsStore
from servedoctor.model import Diagnosis
from servedoctor.redact import redact_text


@app.command("report")
def report_cmd(
    run: str | None = typer.Argument(
        None, metavar="[RUN_DIR|ID|last]", help="a run folder, a run id, or last"
    ),
    session: int | None = typer.Option(
        None, "--session", min=1, help="a fix session of the findings store instead of a run"
    ),
    store: str | None = typer.Option(
        ...,
        "--store",
        default_factory=default_store,
        help="findings store for --session: a path (SQLite) or a SQLAlchemy URL",
    ),
    output: Path | None = typer.Option(
        None,
        "--output",
        "-o",
        help="the HTML file (default: report.html in the run folder; for a session, "
        "fix-session-N.html beside its trial runs)",
    ),
    runs_dir: Path = typer.Option(
        ...,
        "--runs-dir",
        default_factory=default_runs_dir,
        help="where run folders are (for an id or last)",
    ),
) -> None:
    """Write one self-contained HTML page for a launch run or a fix session: the verdict,
    the command and machine, the phase timeline, memory over time, the log with its evidence
    marked, and the hypotheses. It opens offline, prints, and has every secret masked."""
    from servedoctor.launch.record import find_run
    from servedoctor.report.write import write_run_report, write_session_report

    if (run is None) == (session is None):
        raise UserError("name a run (RUN_DIR, an id or last) or a fix session (--session N)")
    if output is not None and output.is_dir():
        raise UserError(f"-o {output}: a folder; give a file name")
    if session is not None:
        fs = FindingsStore.open_existing(store)
        if fs is None:
            raise UserError(f"no findings store at {store or 'the default place'}")
        path = write_session_report(fs, session, output=output)
    else:
        assert run is not None
        path = write_run_report(find_run(run, runs_dir), output=output)
    out.print(str(path), highlight=False, markup=False, soft_wrap=True)


def _say_written(path: Path | None, problem: str | None) -> None:
    with contextlib.suppress(OSError, SystemExit):  # the terminal may be gone by now
        if path is not None:
            err.print(f"report: {path}", highlight=False, markup=False, soft_wrap=True)
        else:
            err.print(f"report not written: {problem}", highlight=False, markup=False)


def report_after_run(run_dir: Path, diagnosis: Diagnosis | None) -> None:
    """At the end of ``launch``: write the run's page and say where; a problem with the
    report is one line, never the run's exit status."""
    from servedoctor.report.write import write_run_report

    try:
        _say_written(write_run_report(run_dir, diagnosis=diagnosis), None)
    except Exception as exc:
        _say_written(None, redact_text(f"{type(exc).__name__}: {exc}"))


def report_after_session(store: FindingsStore, session_id: int) -> None:
    """At the end of ``fix``: the session's page (the environment diff is taken against the
    server's interpreter now, that is, as the session left it)."""
    from servedoctor.report.write import write_session_report

    try:
        path = write_session_report(store, session_id, moves_now="at this session")
        _say_written(path, None)
    except Exception as exc:
        _say_written(None, redact_text(f"{type(exc).__name__}: {exc}"))
