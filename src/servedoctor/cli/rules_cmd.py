"""``servedoctor rules``: list, explain and self-test the knowledge rules."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.markdown import Markdown
from rich.table import Table

from servedoctor.cli.app import app, fail, out
from servedoctor.knowledge.docs import rule_markdown, rule_record
from servedoctor.knowledge.mined import is_generated
from servedoctor.knowledge.registry import default_registry
from servedoctor.knowledge.selftest import run_examples

rules_app = typer.Typer(
    help="List the knowledge rules; `rules show ID` explains one.", invoke_without_command=True
)
app.add_typer(rules_app, name="rules")


@rules_app.callback()
def rules_list(
    ctx: typer.Context,
    json_: Annotated[bool, typer.Option("--json", help="Print every rule as JSON.")] = False,
    all_: Annotated[
        bool,
        typer.Option("--all", help="Also list the rules generated from the engines' messages."),
    ] = False,
) -> None:
    """List the knowledge rules."""
    if ctx.invoked_subcommand is not None:
        return
    registry = default_registry()
    if json_:
        records = [rule_record(r, registry.sources[r.id]) for r in registry]
        out.print(json.dumps(records, indent=1), soft_wrap=True, highlight=False, markup=False)
        return
    table = Table(box=None, header_style="bold")
    table.add_column("id", no_wrap=True, min_width=9)
    table.add_column("name", overflow="fold")
    table.add_column("class", no_wrap=True)
    table.add_column("component", no_wrap=True)
    shown = [r for r in registry if all_ or not is_generated(r)]
    for rule in shown:
        table.add_row(
            rule.id,
            rule.name,
            rule.labels.error_class or f"({rule.area})",
            rule.labels.component or "·",
        )
    out.print(table)
    hidden = len(registry) - len(shown)
    more = f" (+{hidden} generated from the engines' own messages: --all)" if hidden else ""
    out.print(f"{len(shown)} rules{more}. `servedoctor rules show ID` explains one.")


@rules_app.command("show")
def rules_show(
    rule_id: Annotated[str, typer.Argument(help="Rule id (OOM001) or name.")],
    json_: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Explain one rule: what it detects, why it happens, how to fix it."""
    registry = default_registry()
    rule = registry.get(rule_id)
    if rule is None:
        raise fail(f"no rule {rule_id!r}; `servedoctor rules` lists them")
    if json_:
        record = rule_record(rule, registry.sources[rule.id])
        out.print(json.dumps(record, indent=1), soft_wrap=True, highlight=False, markup=False)
        return
    text = rule_markdown(rule, registry.sources[rule.id])
    if out.is_terminal:
        out.print(Markdown(text))
    else:
        out.print(text, markup=False, highlight=False, soft_wrap=True)


@rules_app.command("test")
def rules_test() -> None:
    """Run every rule's own examples: each must fire on `fires` and stay quiet on `ok`."""
    failures = run_examples(default_registry())
    for failure in failures:
        out.print(f"[red]FAIL[/] {failure}")
    total = sum(len(r.examples.fires) + len(r.examples.ok) for r in default_registry())
    out.print(f"{total - len(failures)} passed, {len(failures)} failed")
    raise typer.Exit(1 if failures else 0)
