"""``servedoctor env``: the machine's GPUs, driver, CUDA, torch and serving stack."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.markup import escape

from servedoctor.cli.app import app, err, out
from servedoctor.env.fingerprint import Fingerprint, collect
from servedoctor.env.serverenv import ServerPython, resolve_python

PYTHON_HELP = (
    "The server's Python interpreter (default: the one the server command runs: an explicit "
    "python, a console script's shebang, python on the PATH)."
)


def server_python(
    argv: list[str] | None, python: Path | None, *, quiet: bool = False
) -> ServerPython | None:
    """The server's interpreter from ``--python`` or the command (None when neither is
    given), with a one-line warning on stderr when it is servedoctor's own."""
    if not argv and python is None:
        return None
    found = resolve_python(argv or [], python)
    warning = found.warning()
    if warning and not quiet:
        err.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False, soft_wrap=True)
    return found


def render_env(fp: Fingerprint) -> list[str]:
    lines: list[str] = []
    if fp.gpus:
        for g in fp.gpus:
            memory = f"{g.memory_mib} MiB" if g.memory_mib is not None else "memory ?"
            mig = f"  MIG {g.mig}" if g.mig else ""
            lines.append(f"GPU {g.index}      {g.name}  {g.arch}  {memory}{mig}")
    else:
        lines.append("GPU        none visible")
    driver = fp.driver_version or "-"
    cuda_driver = f" (supports CUDA {fp.cuda_driver})" if fp.cuda_driver else ""
    lines.append(f"driver     {driver}{cuda_driver}")
    lines.append(f"CUDA       runtime {fp.cuda_runtime or '-'}  nvcc {fp.nvcc or '-'}")
    if fp.torch:
        t = fp.torch
        arch = " ".join(t.arch_list) or "-"
        lines.append(f"torch      {t.version}  CUDA {t.cuda or '- (CPU build)'}  archs {arch}")
    else:
        lines.append("torch      not installed")
    lines.append(f"NCCL       {fp.nccl or '-'}")
    for p in fp.packages:
        if p.name.lower() != "torch":
            lines.append(f"{p.role:<10} {p.name} {p.version}")
    lines.append(f"python     {fp.python}")
    if fp.interpreter:
        lines.append(f"packages   {len(fp.distributions)} installed for {fp.interpreter}")
    lines.append(f"os         {fp.os}")
    lines += [f"note       {n}" for n in fp.notes]
    return lines


@app.command(
    "env",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def env_command(
    command: list[str] = typer.Argument(
        None, help="The server command, after --: show the environment its Python sees."
    ),
    python: Path = typer.Option(None, "--python", help=PYTHON_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    no_torch: bool = typer.Option(False, "--no-torch", help="Do not import torch."),
    on: str = typer.Option(
        None, "--on", help="Ask servedoctor on this host: ssh://[user@]host[:port]."
    ),
) -> None:
    """Show GPUs (NVML), driver, CUDA, torch, NCCL and the serving stack, as the server's
    Python sees them (servedoctor's own without a command or --python)."""
    if on is not None:
        from servedoctor.remote.delegate import run_servedoctor
        from servedoctor.remote.url import parse_target

        flags = [*(["--json"] if as_json else []), *(["--no-torch"] if no_torch else [])]
        flags += ["--python", str(python)] if python is not None else []
        rest = ["--", *command] if command else []
        raise typer.Exit(run_servedoctor(parse_target(on), ["env", *flags, *rest]))
    found = server_python(command, python)
    fp = collect(with_torch=not no_torch, python=found.path if found else None)
    if as_json:
        out.print_json(json.dumps(fp.to_dict()))
        return
    for line in render_env(fp):
        out.print(line, markup=False, highlight=False, soft_wrap=True)
