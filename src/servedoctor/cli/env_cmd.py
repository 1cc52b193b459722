"""``servedoctor env``: the machine's GPUs, driver, CUDA, torch and serving stack."""

from __future__ import annotations

import json

import typer

from servedoctor.cli.app import app, out
from servedoctor.env.fingerprint import Fingerprint, collect


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
    lines.append(f"os         {fp.os}")
    lines += [f"note       {n}" for n in fp.notes]
    return lines


@app.command("env")
def env_command(
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    no_torch: bool = typer.Option(False, "--no-torch", help="Do not import torch."),
) -> None:
    """Show GPUs (NVML), driver, CUDA, torch, NCCL and the serving stack."""
    fp = collect(with_torch=not no_torch)
    if as_json:
        out.print_json(json.dumps(fp.to_dict()))
        return
    for line in render_env(fp):
        out.print(line, markup=False, highlight=False, soft_wrap=True)
