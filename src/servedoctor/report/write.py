"""Write a report: a run folder's page (``launch`` at its end, ``report RUN_DIR``) or a fix
session's (``fix`` at its end, ``report --session N``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from servedoctor.errors import UserError
from servedoctor.model import Diagnosis
from servedoctor.redact import redact_url
from servedoctor.report.html import REPORT_NAME, render_run, render_session, write_html
from servedoctor.report.rundata import load_run

if TYPE_CHECKING:  # a run's page never imports the findings store (SQLAlchemy: ~1 s)
    from servedoctor.findings.healthy import PackageMove
    from servedoctor.findings.store import FindingsStore

__all__ = ["default_session_page", "write_run_report", "write_session_report"]


def write_run_report(
    run_dir: Path, *, output: Path | None = None, diagnosis: Diagnosis | None = None
) -> Path:
    """The run folder's report (``run_dir/report.html`` unless ``output``); its path."""
    page = Path(output) if output is not None else run_dir / REPORT_NAME
    run = load_run(run_dir, diagnosis=diagnosis)
    return write_html(render_run(run, page=page), page)


def default_session_page(trial_dirs: Sequence[str | None], session_id: int) -> Path:
    """Beside the session's trial runs (in their runs folder), else in the configured runs
    folder (never the current folder, which may be a checkout)."""
    from servedoctor.config import default_runs_dir

    for d in trial_dirs:
        if d and Path(d).parent.is_dir():
            return Path(d).parent / f"fix-session-{session_id}.html"
    return default_runs_dir() / f"fix-session-{session_id}.html"


def write_session_report(
    store: FindingsStore,
    session_id: int,
    *,
    output: Path | None = None,
    moves: Sequence[PackageMove] | None = None,
    moves_now: str = "now",
) -> Path:
    """A fix session's report; ``moves``: the environment diff the session computed (else
    it is computed now, against the server's interpreter as it is now)."""
    from servedoctor.report.session import load_session, session_moves

    run = store.run(session_id)
    if run is None:
        raise UserError(f"no fix session {session_id} in {redact_url(store.url)}")
    if moves is None:
        moves = session_moves(store, run)
    page = output or default_session_page([t.run_dir for t in run.trials], run.id)
    session = load_session(run, moves=moves, moves_now=moves_now)
    return write_html(render_session(session, page=page), page)
