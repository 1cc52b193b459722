"""The typer application every verb module registers on."""

from __future__ import annotations

import sys

import typer
from rich.console import Console
from typer import Abort
from typer._click.exceptions import (  # typer's own click
    ClickException,
    NoArgsIsHelpError,
    NoSuchOption,
)

from servedoctor.errors import UserError

app = typer.Typer(
    name="servedoctor",
    help="Bring LLM inference servers up on new GPUs; say, with evidence, why they crash.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

#: Verbs that take a server command after ``--``: an unknown option there is the server's.
SERVER_COMMAND_VERBS = ("launch", "fix", "preflight", "compare", "env", "archscan")

out = Console(soft_wrap=False)
err = Console(stderr=True, soft_wrap=True)


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print one clear line on stderr and return the Exit to raise."""
    err.print(f"[bold red]servedoctor:[/] {message}", highlight=False, markup=True)
    return typer.Exit(code)


def run_app(argv: list[str] | None = None) -> None:
    """Run the CLI. Usage errors and :class:`UserError` become one line on stderr, exit 2."""
    try:
        code = app(args=argv, standalone_mode=False)
    except UserError as exc:
        err.print(f"[bold red]servedoctor:[/] {exc}", highlight=False)
        sys.exit(exc.exit_code)
    except (KeyboardInterrupt, Abort):
        err.print("servedoctor: interrupted", highlight=False)
        sys.exit(130)
    except NoArgsIsHelpError as exc:
        # the help text was asked for by giving no arguments: show it, exit like --help
        exc.show()
        sys.exit(0)
    except ClickException as exc:
        ctx = getattr(exc, "ctx", None)  # usage errors know the command they belong to
        hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
        path = ctx.command_path if ctx is not None else ""
        if isinstance(exc, NoSuchOption) and path.rpartition(" ")[2] in SERVER_COMMAND_VERBS:
            hint = (
                " (an option of the server? put the server command after --: "
                f"'{path} [OPTIONS] -- CMD ...')"
            )
        err.print(f"servedoctor: {exc.format_message()}{hint}", highlight=False, markup=False)
        sys.exit(exc.exit_code)
    sys.exit(code if isinstance(code, int) else 0)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            out.print(f"servedoctor {version('servedoctor')}", highlight=False)
        except PackageNotFoundError:
            out.print("servedoctor (not installed as a package)", highlight=False)
        raise typer.Exit(0)


@app.callback()
def _root(
    show_version: bool = typer.Option(
        False,
        "--version",
        "-V",
        help="Print the version and exit.",
        is_eager=True,
        callback=_version,
    ),
) -> None:
    """Bring LLM inference servers up on new GPUs; say, with evidence, why they crash."""
