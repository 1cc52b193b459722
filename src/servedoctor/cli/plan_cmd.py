"""``servedoctor plan``: predict GPU memory before launching a server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.table import Table

from servedoctor.cli.app import app, out
from servedoctor.errors import UserError
from servedoctor.plan import PlanInputs, load_model_config, make_plan, weights_for


def _detect_gpu_gib() -> float:
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            total = float(pynvml.nvmlDeviceGetMemoryInfo(handle).total)
        finally:
            pynvml.nvmlShutdown()
    except Exception as exc:  # NVML missing or no GPU: the user must say
        raise UserError(f"no GPU found through NVML ({exc}); pass --gpu-memory-gib") from None
    return total / 1024**3


@app.command("plan")
def plan_cmd(
    model: Annotated[
        Path, typer.Option("--model", help="Model folder (config.json, safetensors).")
    ],
    engine: Annotated[str, typer.Option(help="sglang or vllm.")] = "sglang",
    gpu_memory_gib: Annotated[
        float | None, typer.Option(help="GPU memory as torch reports it (default: NVML).")
    ] = None,
    tp: Annotated[int, typer.Option(help="Tensor parallel size.")] = 1,
    dp: Annotated[int, typer.Option(help="Data parallel size.")] = 1,
    ep: Annotated[int, typer.Option(help="Expert parallel size.")] = 1,
    pp: Annotated[int, typer.Option(help="Pipeline parallel size.")] = 1,
    kv_cache_dtype: Annotated[str, typer.Option(help="auto, bf16, fp8_e4m3, ...")] = "auto",
    mem_fraction_static: Annotated[
        float | None, typer.Option(help="SGLang --mem-fraction-static.")
    ] = None,
    gpu_memory_utilization: Annotated[
        float | None, typer.Option(help="vLLM --gpu-memory-utilization.")
    ] = None,
    context_length: Annotated[int | None, typer.Option(help="Max context per request.")] = None,
    cuda_graph_max_bs: Annotated[int | None, typer.Option(help="Largest captured batch.")] = None,
    weights_gib_per_gpu: Annotated[
        float | None, typer.Option(help="Override the weight estimate (GiB per GPU).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the JSON contract.")] = False,
) -> None:
    """Predict weights, KV cache tokens and CUDA-graph headroom per GPU."""
    if engine not in {"sglang", "vllm"}:
        raise UserError(f"--engine must be sglang or vllm, not {engine!r}")
    eng: Literal["sglang", "vllm"] = "sglang" if engine == "sglang" else "vllm"
    fraction = mem_fraction_static if eng == "sglang" else gpu_memory_utilization
    other = gpu_memory_utilization if eng == "sglang" else mem_fraction_static
    if other is not None:
        raise UserError(
            "--mem-fraction-static is SGLang's, --gpu-memory-utilization is vLLM's: "
            f"use the one for --engine {eng}"
        )
    config = load_model_config(model)
    weights = weights_for(model, config) if weights_gib_per_gpu is None else None
    inputs = PlanInputs(
        engine=eng,
        gpu_memory_gib=gpu_memory_gib if gpu_memory_gib is not None else _detect_gpu_gib(),
        tp=tp,
        dp=dp,
        ep=ep,
        pp=pp,
        kv_cache_dtype=kv_cache_dtype,
        fraction=fraction,
        context_length=context_length,
        cuda_graph_max_bs=cuda_graph_max_bs,
        weights_gib_per_gpu=weights_gib_per_gpu,
    )
    plan = make_plan(config, inputs, weights=weights)
    if as_json:
        typer.echo(json.dumps(plan.to_dict(), indent=2))
        return
    table = Table(title=f"{config.model_type} on {eng}, TP{tp} · {inputs.gpu_memory_gib:.1f} GiB")
    table.add_column("")
    table.add_column("per GPU", justify="right")
    table.add_row("weights", f"{plan.weights_gib_per_gpu:.2f} GiB ({plan.weights_source})")
    table.add_row("KV bytes / token", f"{plan.kv_bytes_per_token:,} ({plan.kv.describe()})")
    table.add_row("fraction", f"{plan.fraction}")
    table.add_row("KV tokens", f"{plan.kv_tokens:,} ({plan.kv_gib_per_gpu:.2f} GiB)")
    table.add_row(
        "max context × concurrency",
        f"{plan.context_length:,} tokens × {plan.max_concurrency:.2f} requests",
    )
    table.add_row(
        "headroom (graphs, activations)",
        f"{plan.headroom_gib:.2f} GiB free vs {plan.headroom_needed_gib:.2f} GiB needed "
        f"(cuda_graph_max_bs {plan.cuda_graph_max_bs})",
    )
    verdict = "[green]fits[/]" if plan.graph_capture_fits else "[red]likely OOM[/]"
    table.add_row("CUDA graph capture", verdict)
    table.add_row("recommended fraction", str(plan.recommended_fraction))
    out.print(table)
    for note in plan.notes:
        out.print(f"  note: {note}", highlight=False)
