"""``servedoctor archscan``: which SASS/PTX compiled libraries carry, and can this GPU run them."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import typer

from servedoctor.cli.app import app, out
from servedoctor.cli.env_cmd import PYTHON_HELP, server_python
from servedoctor.env.arch import Arch, parse_arch
from servedoctor.env.archjudge import judge
from servedoctor.env.fatbin import ScanResult, is_library_name, library_files, scan_file
from servedoctor.env.fingerprint import collect, probe_nvml
from servedoctor.env.ptx import Version, parse_version
from servedoctor.env.stack import stack_libraries
from servedoctor.errors import UserError


def _server_command(args: list[str]) -> bool:
    """``archscan -- vllm serve M``: arguments that are a command to run, not paths (the
    first is a program: on the PATH, or an executable file that is no library)."""
    if not args:
        return False
    first = Path(args[0])
    if first.is_file():
        return os.access(first, os.X_OK) and not is_library_name(first)
    return not first.exists() and shutil.which(args[0]) is not None


def _stack_of(python: str | None) -> dict[str, list[Path]]:
    """The stack's compiled libraries in ``python``'s environment (servedoctor's own: None)."""
    if python is None:
        return stack_libraries()
    return collect(python=python, with_torch=False, libraries=True).stack_libraries()


def _targets(paths: list[Path], python: str | None = None) -> list[Path]:
    if paths:
        missing = [p for p in paths if not p.exists()]
        if missing:
            raise UserError(f"no such file or directory: {missing[0]}")
        return library_files(paths)
    found = [lib for libs in _stack_of(python).values() for lib in libs]
    if not found:
        raise UserError(
            "no installed stack package (torch, sgl-kernel, vllm, flashinfer...) has compiled "
            "libraries here; give files or directories to scan"
        )
    return found


def _detected() -> tuple[Arch | None, Version | None]:
    """This machine's first GPU and the CUDA version its driver supports, through NVML."""
    gpus, _, cuda_driver = probe_nvml([])
    return (parse_arch(gpus[0].arch) if gpus else None), parse_version(cuda_driver)


def _cuda_version(text: str) -> Version:
    version = parse_version(text)
    if version is None:
        raise UserError(f"--cuda-driver wants a CUDA version such as 12.8, not {text!r}")
    return version


def _line(result: ScanResult) -> str:
    if result.error:
        return f"{result.file}: {result.error}"
    sass = " ".join(result.sass) or "-"
    ptx = " ".join(result.ptx) or "-"
    return f"{result.file}: SASS {sass} · PTX {ptx}"


@app.command(
    "archscan",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def archscan_command(
    paths: list[str] = typer.Argument(
        None,
        help="Libraries or directories (default: the stack); or, after --, the server "
        "command whose Python's stack to scan.",
    ),
    python: Path = typer.Option(None, "--python", help=PYTHON_HELP),
    gpu: str = typer.Option(None, "--gpu", help="Judge for this arch (sm_XY), present or not."),
    cuda_driver: str = typer.Option(
        None,
        "--cuda-driver",
        help="The CUDA version the driver supports (e.g. 12.8), to judge PTX JIT "
        "(default: this machine's driver, when NVML answers).",
    ),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per file."),
) -> None:
    """List the SASS archs and PTX versions compiled libraries carry; judge them for a GPU."""
    detected_gpu, detected_driver = (None, None) if gpu and cuda_driver else _detected()
    target = parse_arch(gpu) if gpu else detected_gpu
    driver = _cuda_version(cuda_driver) if cuda_driver else detected_driver
    args = list(paths or [])
    command = args if _server_command(args) else None
    found = server_python(command, python)
    files = _targets([] if command else [Path(a) for a in args], found.path if found else None)
    started = time.perf_counter()
    not_runnable = 0
    scanned = 0
    for path in files:
        result = scan_file(path)
        scanned += path.stat().st_size if path.is_file() else 0
        judgement = (
            judge(result, target, driver_cuda=driver) if target and not result.error else None
        )
        if judgement and not judgement.runnable:
            not_runnable += 1
        if as_json:
            record = result.to_dict()
            if judgement:
                record.update(runnable=judgement.runnable, how=judgement.how)
                if judgement.ptx_needs_cuda:
                    record.update(ptx_needs_cuda=judgement.ptx_needs_cuda)
            out.print(json.dumps(record), markup=False, highlight=False, soft_wrap=True)
            continue
        out.print(_line(result), markup=False, highlight=False, soft_wrap=True)
        if judgement and result.has_device_code:
            out.print(
                f"  {judgement.how}: {judgement.message}",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
    if not as_json:
        seconds = time.perf_counter() - started
        summary = f"{len(files)} files, {scanned / 1e6:.1f} MB in {seconds:.2f} s"
        if target:
            summary += f"; {not_runnable} without code for {target.base.sm}"
        out.print(summary, markup=False, highlight=False)
    if not_runnable:
        raise typer.Exit(1)
