"""``servedoctor preflight``: the risks of a server command on this machine, before it runs."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from servedoctor.cli.app import app, out
from servedoctor.cli.env_cmd import PYTHON_HELP, server_python
from servedoctor.env.arch import parse_arch
from servedoctor.env.fingerprint import collect
from servedoctor.env.preflight import PreflightReport, run_preflight
from servedoctor.errors import UserError


def render_report(report: PreflightReport) -> list[str]:
    blocking = sum(1 for r in report.risks if r.severity == "blocking")
    warnings = len(report.risks) - blocking
    gpu = report.gpu.sm if report.gpu else "no GPU"
    lines = [f"preflight: {report.engine} on {gpu}: {blocking} blocking, {warnings} warning(s)"]
    for risk in report.risks:
        lines.append(f"{risk.severity.upper():8} {risk.rule} {risk.name}")
        lines.append(f"  {risk.summary}")
        for item in risk.evidence:
            lines.append(f"  evidence: {item}")
        for change, cause in zip(risk.changes, risk.causes, strict=True):
            lines.append(f"  change:   {change.describe()}  ({cause})")
        if risk.references:
            lines.append(f"  see:      {risk.references[0]}")
    lines += [f"note: {n}" for n in report.notes]
    if not report.risks:
        lines.append("no risks found")
    return lines


@app.command(
    "preflight",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def preflight_command(
    command: list[str] = typer.Argument(None, help="The server command, after --."),
    model: Path = typer.Option(None, "--model", help="Local model directory (config.json)."),
    gpu: str = typer.Option(None, "--gpu", help="Check for this arch (sm_XY) instead."),
    no_scan: bool = typer.Option(False, "--no-scan", help="Skip the library arch scan."),
    python: Path = typer.Option(None, "--python", help=PYTHON_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    on: str = typer.Option(
        None, "--on", help="Check on this host, by servedoctor there: ssh://[user@]host[:port]."
    ),
) -> None:
    """Check a server command before launch: exit 1 when a blocking risk is found."""
    if not command:
        raise UserError("give the server command after --, e.g. preflight -- vllm serve MODEL")
    if on is not None:  # the model path and the interpreter are the remote host's
        from servedoctor.remote.delegate import run_servedoctor
        from servedoctor.remote.url import parse_target

        flags = [*(["--json"] if as_json else []), *(["--no-scan"] if no_scan else [])]
        for name, value in (("--model", model), ("--gpu", gpu), ("--python", python)):
            flags += [name, str(value)] if value is not None else []
        code = run_servedoctor(parse_target(on), ["preflight", *flags, "--", *command])
        raise typer.Exit(code)
    if model is not None and not model.is_dir():
        raise UserError(f"--model {model}: not a directory")
    target = parse_arch(gpu) if gpu else None
    found = server_python(command, python)
    interpreter = found.path if found else None
    fingerprint = collect(python=interpreter, libraries=not no_scan)
    report = run_preflight(
        command,
        fingerprint=fingerprint,
        gpu=target,
        model=model,
        scan=not no_scan,
        python=interpreter,
    )
    if as_json:
        out.print(json.dumps(report.to_dict()), markup=False, highlight=False, soft_wrap=True)
    else:
        for line in render_report(report):
            out.print(line, markup=False, highlight=False, soft_wrap=True)
    if report.blocking:
        raise typer.Exit(1)
