"""Weight bytes per GPU: exact from safetensors headers, or estimated from config.json.

Tensors are sorted into what the parallel layout shards and what it replicates using the
name patterns in ``plan/data/sharding.yaml``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from servedoctor.datafile import load_yaml
from servedoctor.plan.config import ModelConfig
from servedoctor.plan.safetensors import TensorInfo

__all__ = ["WeightSplit", "classify", "estimate_from_config", "split_tensors"]

GIB = 1024**3
Kind = Literal["vocab", "expert", "replicated", "tp"]


class _Rule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Kind
    pattern: str


class _Rules(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    rules: list[_Rule]


@lru_cache(maxsize=1)
def _rules() -> list[tuple[Kind, re.Pattern[str]]]:
    path = Path(__file__).parent / "data" / "sharding.yaml"
    data = _Rules.model_validate(load_yaml(path))
    return [(r.kind, re.compile(r.pattern)) for r in data.rules]


def classify(name: str) -> Kind:
    for kind, regex in _rules():
        if regex.search(name):
            return kind
    return "tp"


@dataclass(frozen=True, slots=True)
class WeightSplit:
    """Checkpoint bytes by layout kind, and the bytes one GPU holds."""

    vocab: int = 0
    expert: int = 0
    replicated: int = 0
    tp: int = 0
    exact: bool = True

    @property
    def total(self) -> int:
        return self.vocab + self.expert + self.replicated + self.tp

    def per_gpu_bytes(self, *, tp: int, pp: int = 1, dp_attention: int = 1) -> float:
        """Bytes on one GPU. Pipeline stages split layers evenly; with DP attention the
        attention weights are split over ``tp / dp`` ranks only."""
        attn_tp = max(tp // max(dp_attention, 1), 1)
        sharded = self.vocab / tp + self.expert / tp + self.tp / attn_tp
        return (sharded + self.replicated) / max(pp, 1)

    def per_gpu_gib(self, *, tp: int, pp: int = 1, dp_attention: int = 1) -> float:
        return self.per_gpu_bytes(tp=tp, pp=pp, dp_attention=dp_attention) / GIB


def split_tensors(
    tensors: Iterable[TensorInfo], *, skip_mtp_layer: int | None = None
) -> WeightSplit:
    """Sum tensor bytes by kind. ``skip_mtp_layer``: index of a multi-token-prediction layer
    stored in the checkpoint but loaded only with speculative decoding."""
    sums: dict[str, int] = {"vocab": 0, "expert": 0, "replicated": 0, "tp": 0}
    mtp_prefix = f"model.layers.{skip_mtp_layer}." if skip_mtp_layer is not None else None
    for tensor in tensors:
        if mtp_prefix and tensor.name.startswith(mtp_prefix):
            continue
        sums[classify(tensor.name)] += tensor.nbytes
    return WeightSplit(sums["vocab"], sums["expert"], sums["replicated"], sums["tp"], True)


#: Bytes per parameter of quantized linear weights, scales included (estimates).
_QUANT_BYTES = {
    "fp8": 1.0 + 4 / (128 * 128),
    "modelopt_fp4": 0.5 + 1 / 16,
    "nvfp4": 0.5 + 1 / 16,
    "mxfp4": 0.5 + 1 / 32,
    "awq": 0.5 + 4 / 128,
    "gptq": 0.5 + 4 / 128,
    "compressed-tensors": 1.0 + 4 / (128 * 128),
}


def estimate_from_config(model: ModelConfig) -> WeightSplit:
    """Parameter count from the shapes in config.json; quantized checkpoints are assumed to
    quantize the MoE experts (and dense linears for fp8/int4) and keep embeddings in bf16."""
    h, layers, b = model.hidden_size, model.num_layers, model.dtype_bytes
    quant = (model.quant_method or "").lower()
    qb = _QUANT_BYTES.get(quant, float(b))
    dense_linear_bytes = qb if quant in {"fp8", "awq", "gptq", "compressed-tensors"} else b
    vocab = model.vocab_size * h * b * (1 if model.tie_word_embeddings else 2)
    if model.attention == "mha":
        attn = h * (model.num_heads + 2 * model.num_kv_heads) * model.head_dim
        attn += model.num_heads * model.head_dim * h
        attn_rep = 0
    else:
        q_lora = model.q_lora_rank or h
        qk = model.qk_nope_head_dim + model.qk_rope_head_dim
        attn = q_lora * model.num_heads * qk
        attn += model.kv_lora_rank * model.num_heads * (model.qk_nope_head_dim + model.v_head_dim)
        attn += model.num_heads * model.v_head_dim * h
        attn_rep = (h * q_lora if model.q_lora_rank else 0) + h * (
            model.kv_lora_rank + model.qk_rope_head_dim
        )
        if model.attention == "dsa":
            attn_rep += q_lora * 64 * model.index_head_dim + h * model.index_head_dim + h * 64
    moe_layers = layers - model.dense_layers if model.is_moe else 0
    dense_mlp = 3 * h * model.intermediate_size * (layers - moe_layers)
    experts = 3 * h * model.moe_intermediate_size * model.num_experts * moe_layers
    shared = 3 * h * model.moe_intermediate_size * model.shared_experts * moe_layers
    router = h * model.num_experts * moe_layers
    norms = 2 * h * layers + h
    return WeightSplit(
        vocab=int(vocab),
        expert=int(experts * qb),
        replicated=int((attn_rep * layers + router + norms) * b),
        tp=int((attn * layers + dense_mlp + shared) * dense_linear_bytes),
        exact=False,
    )
