"""``plan``: weights, KV tokens and CUDA-graph headroom per GPU, before anything launches."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from servedoctor.errors import UserError
from servedoctor.plan.config import ModelConfig
from servedoctor.plan.kv import KVLayout, kv_layout
from servedoctor.plan.rules import (
    GIB,
    activation_bytes_per_token,
    decode_bytes_per_seq,
    load_rules,
)
from servedoctor.plan.safetensors import read_checkpoint
from servedoctor.plan.weights import WeightSplit, estimate_from_config, split_tensors

__all__ = ["Plan", "PlanInputs", "make_plan", "weights_for"]

Engine = Literal["sglang", "vllm"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanInputs:
    """``gpu_memory_gib`` is the capacity torch reports (``total_memory``), per GPU.
    ``fraction`` is ``--mem-fraction-static`` (SGLang) or ``--gpu-memory-utilization``
    (vLLM); ``None`` takes the engine's default."""

    engine: Engine
    gpu_memory_gib: float
    tp: int = 1
    dp: int = 1
    ep: int = 1
    pp: int = 1
    dp_attention: bool = False
    kv_cache_dtype: str = "auto"
    fraction: float | None = None
    context_length: int | None = None
    cuda_graph_max_bs: int | None = None
    chunked_prefill_size: int | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    weights_gib_per_gpu: float | None = None
    page_size: int | None = None


@dataclass(frozen=True, slots=True)
class Plan:
    engine: Engine
    weights_gib_per_gpu: float
    weights_source: str
    kv: KVLayout
    kv_tokens: int
    kv_gib_per_gpu: float
    fraction: float
    headroom_gib: float
    headroom_needed_gib: float
    graph_capture_fits: bool
    recommended_fraction: float | None
    context_length: int
    cuda_graph_max_bs: int
    notes: tuple[str, ...] = ()

    @property
    def kv_bytes_per_token(self) -> int:
        return self.kv.bytes_per_token

    @property
    def max_concurrency(self) -> float:
        return self.kv_tokens / self.context_length if self.context_length else 0.0

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract: exactly these keys."""
        return {
            "weights_gib_per_gpu": round(self.weights_gib_per_gpu, 3),
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "kv_tokens": self.kv_tokens,
            "kv_gib_per_gpu": round(self.kv_gib_per_gpu, 3),
            "graph_capture_fits": self.graph_capture_fits,
            "recommended_fraction": self.recommended_fraction,
        }


def weights_for(model_dir: Path | None, model: ModelConfig) -> WeightSplit:
    """Exact bytes from safetensors headers when the checkpoint is there, else an estimate.
    A multi-token-prediction layer stored after the last layer is not counted."""
    tensors = read_checkpoint(model_dir) if model_dir is not None and model_dir.is_dir() else None
    if tensors:
        return split_tensors(tensors, skip_mtp_layer=model.num_layers)
    return estimate_from_config(model)


def make_plan(
    model: ModelConfig, inputs: PlanInputs, *, weights: WeightSplit | None = None
) -> Plan:
    if inputs.tp < 1 or inputs.pp < 1 or inputs.dp < 1 or inputs.ep < 1:
        raise UserError("parallel sizes must be at least 1")
    if inputs.gpu_memory_gib <= 0:
        raise UserError("--gpu-memory-gib must be positive")
    if inputs.fraction is not None and not 0 < inputs.fraction <= 1:
        raise UserError("the memory fraction must be in (0, 1]")
    notes: list[str] = []
    if inputs.weights_gib_per_gpu is not None:
        weights_gib, exact = inputs.weights_gib_per_gpu, "given"
    else:
        split = weights if weights is not None else estimate_from_config(model)
        dp_attn = inputs.dp if inputs.dp_attention else 1
        weights_gib = split.per_gpu_gib(tp=inputs.tp, pp=inputs.pp, dp_attention=dp_attn)
        exact = "exact, safetensors headers" if split.exact else "estimated from config.json"
    layout = kv_layout(model, kv_cache_dtype=inputs.kv_cache_dtype, tp=inputs.tp, pp=inputs.pp)
    context = inputs.context_length or model.max_context
    if inputs.engine == "sglang":
        return _sglang(model, inputs, weights_gib, exact, layout, context, notes)
    return _vllm(model, inputs, weights_gib, exact, layout, context, notes)


def _sglang(
    model: ModelConfig,
    inputs: PlanInputs,
    weights_gib: float,
    exact: str,
    layout: KVLayout,
    context: int,
    notes: list[str],
) -> Plan:
    rules = load_rules()
    sg = rules.sglang
    chunk_default, bs_default = sg.defaults(inputs.gpu_memory_gib, inputs.tp)
    chunk = inputs.chunked_prefill_size or chunk_default
    graph_bs = inputs.cuda_graph_max_bs if inputs.cuda_graph_max_bs is not None else bs_default
    fraction = inputs.fraction
    if fraction is None:
        fraction = sg.default_fraction(inputs.gpu_memory_gib, inputs.tp, inputs.pp)
        notes.append(f"--mem-fraction-static not given: SGLang's default {fraction}")
    total = inputs.gpu_memory_gib - (sg.context_gib + sg.nccl_gib_per_rank * inputs.tp)
    rest = (total - weights_gib) - total * (1 - fraction)
    page = inputs.page_size or (sg.dsa_page_size if model.attention == "dsa" else 1)
    tokens = max(int(rest * GIB) // layout.bytes_per_token, 0) // page * page
    if tokens == 0:
        notes.append("no room for the KV cache: SGLang stops with 'Not enough memory'")
    needed = _headroom_needed(model, inputs.tp, chunk, graph_bs, context)
    # ReqToTokenPool: int32 token slots for every request slot, allocated beside the KV
    # pool but not counted in `rest` (max_running_requests = tokens / context * 512,
    # clamped to 2048..4096).
    requests = min(max(int(tokens / max(context, 1) * 512), 2048), 4096)
    needed += (requests + 1) * context * 4 / GIB
    return _finish(
        "sglang",
        weights_gib=weights_gib,
        exact=exact,
        layout=layout,
        tokens=tokens,
        fraction=fraction,
        total_gib=total,
        needed_gib=needed,
        floor_gib=weights_gib,
        context=context,
        graph_bs=graph_bs,
        notes=notes,
    )


def _vllm(
    model: ModelConfig,
    inputs: PlanInputs,
    weights_gib: float,
    exact: str,
    layout: KVLayout,
    context: int,
    notes: list[str],
) -> Plan:
    rules = load_rules()
    vl, head = rules.vllm, rules.headroom
    large = inputs.gpu_memory_gib >= vl.large_gpu_gib
    batched = inputs.max_num_batched_tokens or vl.batched_tokens[0 if large else 1]
    seqs = inputs.max_num_seqs or vl.max_num_seqs[0 if large else 1]
    fraction = inputs.fraction if inputs.fraction is not None else 0.9
    non_torch = vl.non_torch_gib + (vl.nccl_gib if inputs.tp * inputs.pp > 1 else 0.0)
    act_token = activation_bytes_per_token(model, tp=inputs.tp, headroom=head)
    logits = head.profile_logits_buffers * model.vocab_size * 4 * min(seqs, batched)
    peak = max(batched * act_token, logits) / GIB
    kv_gib = inputs.gpu_memory_gib * fraction - weights_gib - peak - non_torch
    block = inputs.page_size or vl.block_size
    tokens = max(int(kv_gib * GIB) // (layout.bytes_per_token * block), 0) * block
    if tokens == 0:
        notes.append("no memory for the cache blocks: vLLM stops at startup")
    graph_bs = inputs.cuda_graph_max_bs or min(2 * seqs, 512)
    needed = (
        head.runtime_gib
        + graph_bs * decode_bytes_per_seq(model, tp=inputs.tp, context=context, headroom=head) / GIB
    )
    return _finish(
        "vllm",
        weights_gib=weights_gib,
        exact=exact,
        layout=layout,
        tokens=tokens,
        fraction=fraction,
        total_gib=inputs.gpu_memory_gib,
        needed_gib=needed,
        floor_gib=weights_gib + peak + non_torch,
        context=context,
        graph_bs=graph_bs,
        notes=notes,
    )


def _finish(
    engine: Engine,
    *,
    weights_gib: float,
    exact: str,
    layout: KVLayout,
    tokens: int,
    fraction: float,
    total_gib: float,
    needed_gib: float,
    floor_gib: float,
    context: int,
    graph_bs: int,
    notes: list[str],
) -> Plan:
    """The plan both engines share: graph headroom against what capture needs, and the
    highest fraction that still leaves it (never below what weights and profiling take)."""
    headroom = total_gib * (1 - fraction)
    best = 1 - needed_gib / total_gib
    recommended = math.floor(best * 100) / 100 if best > floor_gib / total_gib else None
    return Plan(
        engine=engine,
        weights_gib_per_gpu=weights_gib,
        weights_source=exact,
        kv=layout,
        kv_tokens=tokens,
        kv_gib_per_gpu=tokens * layout.bytes_per_token / GIB,
        fraction=fraction,
        headroom_gib=headroom,
        headroom_needed_gib=needed_gib,
        graph_capture_fits=headroom >= needed_gib and tokens > 0,
        recommended_fraction=recommended,
        context_length=context,
        cuda_graph_max_bs=graph_bs,
        notes=tuple(notes),
    )


def _headroom_needed(model: ModelConfig, tp: int, chunk: int, graph_bs: int, context: int) -> float:
    """GiB SGLang needs outside the static pool: runtime buffers, one prefill chunk's
    activations and the CUDA graph pool for the largest captured batch."""
    head = load_rules().headroom
    prefill = chunk * activation_bytes_per_token(model, tp=tp, headroom=head)
    graphs = graph_bs * decode_bytes_per_seq(model, tp=tp, context=context, headroom=head)
    return head.runtime_gib + (prefill + graphs) / GIB
