"""``servedoctor diagnose`` and ``servedoctor eval``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from servedoctor.cli.app import app, err, fail, out
from servedoctor.diagnose import diagnose_path
from servedoctor.diagnose.evaluate import FIELDS, evaluate
from servedoctor.engines import all_engines
from servedoctor.errors import UserError
from servedoctor.report.terminal import render


def _engine_choice(value: str) -> str:
    if value != "auto" and value not in all_engines():
        raise typer.BadParameter(f"choose auto or one of: {', '.join(sorted(all_engines()))}")
    return value


@app.command("diagnose")
def diagnose(
    logs: Annotated[list[str], typer.Argument(help="Log files to diagnose; - reads stdin.")],
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
) -> None:
    """Say what failed in a server log, when, where, and what one change would test it.

    Exit 0: no failure found; 1: a failure diagnosed; 2: bad input.
    """
    bad = failed = False
    for log in logs:
        try:
            diagnosis = diagnose_path(log, engine=engine, arch=arch, engine_version=engine_version)
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
    raise typer.Exit(2 if bad else 1 if failed else 0)


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
    if score.failures:
        share = score.with_change / score.failures
        out.print(f"{'with change':<12} {share:.3f}  ({score.with_change}/{score.failures})")
