"""``servedoctor compare``: the model card's command vs the command used vs the server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from servedoctor.cli.app import app, out
from servedoctor.compare import card_commands, compare
from servedoctor.engines.command import ServerCommand, parse_command
from servedoctor.errors import UserError

_STYLE = {
    "same": "dim",
    "differs": "yellow",
    "missing": "yellow",
    "extra": "cyan",
    "server-changed": "magenta",
}


def _pick_card(path: Path, used: ServerCommand) -> tuple[ServerCommand | None, str | None]:
    commands = card_commands(path)
    same_engine = [c for c in commands if c.command.engine == used.engine]
    if not same_engine:
        raise UserError(f"{path}: no {used.engine} launch command in its code blocks")
    chosen = same_engine[0]
    return chosen.command, f"{path}:{chosen.line}"


@app.command("compare", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def compare_cmd(
    ctx: typer.Context,
    model_card: Annotated[
        Path | None, typer.Option("--model-card", help="README.md with a launch command.")
    ] = None,
    log: Annotated[Path | None, typer.Option("--log", help="The server's log.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Diff the command (after --) against a model card and the server's effective config."""
    argv = [a for a in ctx.args if a != "--"]
    if not argv:
        raise UserError("give the server command after --, e.g. compare -- vllm serve MODEL")
    used = parse_command(argv)
    card, where = _pick_card(model_card, used) if model_card is not None else (None, None)
    lines = None
    if log is not None:
        try:
            lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError as exc:
            raise UserError(f"cannot read {log}: {exc}") from None
    result = compare(used, card=card, log_lines=lines, card_text=where)
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=2))
        return
    table = Table(title=f"{used.engine}: model card · command · server")
    for column in ("flag", "card", "used", "server", "status", "why"):
        table.add_column(column, overflow="fold")
    for row in result.rows:
        style = _STYLE[row.status]
        table.add_row(
            row.flag,
            row.card or "",
            row.used or "",
            row.effective or "",
            f"[{style}]{row.status}[/]",
            row.why,
        )
    out.print(table)
    if where:
        out.print(f"model card command: {where}", highlight=False)
    if result.unknown_flags:
        out.print(f"unknown flags (kept): {' '.join(result.unknown_flags)}", highlight=False)
