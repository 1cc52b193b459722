"""``servedoctor findings``: list fix sessions from the store; ``export`` writes Markdown."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from servedoctor.cli.app import app, out
from servedoctor.config import default_store
from servedoctor.errors import UserError
from servedoctor.findings.export import render_markdown
from servedoctor.findings.store import FindingsStore, StoredRun, store_path
from servedoctor.redact import redact_url

findings_app = typer.Typer(
    help="List what fix sessions tried and found (the findings store).",
    no_args_is_help=False,
    invoke_without_command=True,
)
app.add_typer(findings_app, name="findings")

_STORE = typer.Option(
    ...,
    "--store",
    default_factory=default_store,
    help="findings store: a path (SQLite) or a SQLAlchemy URL",
)


def _read(store: str | None, limit: int | None) -> tuple[list[StoredRun], str]:
    """The runs in the store and where it is. A ``--store`` file that does not exist is a
    usage error (a typo should not read as "no findings"); the default one just has none."""
    fs = FindingsStore.open_existing(store)
    if fs is None:
        if store:
            raise UserError(f"no findings store at {store}")
        return [], str(store_path(store))
    return fs.runs(limit=limit), redact_url(fs.url)


@findings_app.callback()
def findings_list(
    ctx: typer.Context,
    store: str | None = _STORE,
    json_out: bool = typer.Option(False, "--json", help="one JSON object per line (JSON Lines)"),
    limit: int = typer.Option(50, "--limit", min=1),
) -> None:
    """List fix sessions, newest first: what failed and what fixed it."""
    if ctx.invoked_subcommand is not None:
        return
    runs, where = _read(store, limit)
    if json_out:
        for run in runs:
            out.print(json.dumps(run.to_dict()), highlight=False, soft_wrap=True)
        return
    if not runs:
        out.print(f"no findings yet in {where}", highlight=False)
        return
    for run in runs:
        failed = f"{run.error_class or '?'}/{run.phase or '?'}" if run.error_class else "-"
        fixed = " + ".join(c.describe() for c in run.fix) or "-"
        out.print(
            f"#{run.id:<4d} {run.started_at}  {run.status:11s} {run.engine:12s} "
            f"{len(run.trials):2d} trials  failed: {failed:24s} fix: {fixed}",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )


@findings_app.command("export")
def findings_export(
    store: str | None = _STORE,
    output: Path | None = typer.Option(None, "--output", "-o", help="file (default: stdout)"),
    limit: int | None = typer.Option(None, "--limit", min=1),
    html: bool = typer.Option(
        False, "--html", help="one self-contained HTML page (trials drawn as timelines)"
    ),
) -> None:
    """Write the findings as Markdown (or HTML): what failed, on which fingerprint, what
    fixed it."""
    runs, where = _read(store, limit)
    if html:
        from servedoctor.report.html import render_journal
        from servedoctor.report.session import load_session

        page = output or Path("findings.html")  # links are relative to the page
        sessions = [load_session(r, with_log=False) for r in runs]
        text = render_journal(sessions, store=where, page=page)
    else:
        text = render_markdown(runs, store=where)
    if output is None:
        out.print(text, highlight=False, markup=False, soft_wrap=True, end="")
    else:
        output.write_text(text, encoding="utf-8")
        out.print(f"wrote {output}", highlight=False)
