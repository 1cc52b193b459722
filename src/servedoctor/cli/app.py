"""The typer application every verb module registers on."""

from __future__ import annotations

import sys

import typer
from rich.console import Console

from servedoctor.errors import UserError

app = typer.Typer(
    name="servedoctor",
    help="Bring LLM inference servers up on new GPUs; say, with evidence, why they crash.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

out = Console(soft_wrap=False)
err = Console(stderr=True, soft_wrap=True)


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print one clear line on stderr and return the Exit to raise."""
    err.print(f"[bold red]servedoctor:[/] {message}", highlight=False, markup=True)
    return typer.Exit(code)


def run_app() -> None:
    """Run the CLI; a :class:`UserError` anywhere becomes one line on stderr and exit 2."""
    try:
        app()
    except UserError as exc:
        err.print(f"[bold red]servedoctor:[/] {exc}", highlight=False)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err.print("servedoctor: interrupted", highlight=False)
        sys.exit(130)
