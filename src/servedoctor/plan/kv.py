"""KV cache bytes per token on one GPU, by attention kind and KV dtype.

Layouts follow the engines' memory pools (SGLang ``mem_cache/memory_pool.py``):

* MHA/GQA/MQA: K and V per KV head; KV heads are split over TP ranks, and each rank keeps
  one (replicated) when there are fewer KV heads than ranks.
* MLA: one latent ``kv_lora_rank + qk_rope_head_dim`` vector per token and layer,
  replicated on every TP rank.
* DSA (DeepSeek sparse attention, SGLang's NSA pool): MLA latent plus the indexer key cache.
  With an fp8 KV cache the latent is stored FlashMLA-style: ``kv_lora_rank`` fp8 bytes, one
  fp32 scale per 128-wide tile, and the rope part kept in bf16 (512 + 16 + 128 = 656 bytes
  for DeepSeek-V3.2 / GLM-5). The indexer cache is always fp8 keys plus one fp32 scale per
  128 values (128 + 4 = 132 bytes).
"""

from __future__ import annotations

from dataclasses import dataclass

from servedoctor.errors import UserError
from servedoctor.plan.config import ModelConfig

__all__ = ["KVLayout", "kv_dtype_bytes", "kv_layout"]

QUANT_BLOCK = 128
SCALE_BYTES = 4

_KV_DTYPE_BYTES: dict[str, float] = {
    "bf16": 2,
    "bfloat16": 2,
    "fp16": 2,
    "float16": 2,
    "half": 2,
    "float32": 4,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
    "fp8_ds_mla": 1,
    "mxfp8": 1,
    "fp4_e2m1": 0.5,
    "nvfp4": 0.5,
    "fp4_mx_block16": 0.5,
}


def kv_dtype_bytes(kv_cache_dtype: str, model_dtype_bytes: int) -> float:
    """Bytes per KV element; ``auto`` is the model's dtype."""
    if kv_cache_dtype == "auto":
        return float(model_dtype_bytes)
    try:
        return _KV_DTYPE_BYTES[kv_cache_dtype]
    except KeyError:
        known = ", ".join(["auto", *sorted(_KV_DTYPE_BYTES)])
        raise UserError(f"unknown kv cache dtype {kv_cache_dtype!r}; known: {known}") from None


@dataclass(frozen=True, slots=True)
class KVLayout:
    """Bytes one token takes in the KV pool of one GPU, split into its parts."""

    attention: str
    layers: int
    kv_bytes_per_layer: float
    index_bytes_per_layer: float = 0.0
    kv_heads_per_rank: int = 0
    replicated: bool = False

    @property
    def bytes_per_token(self) -> int:
        return round((self.kv_bytes_per_layer + self.index_bytes_per_layer) * self.layers)

    def describe(self) -> str:
        if self.attention == "mha":
            rep = " (replicated: fewer KV heads than TP ranks)" if self.replicated else ""
            return f"{self.kv_heads_per_rank} KV head(s) per rank{rep}"
        text = f"latent {self.kv_bytes_per_layer:g} B/layer, replicated on every TP rank"
        if self.index_bytes_per_layer:
            text += f", indexer keys {self.index_bytes_per_layer:g} B/layer"
        return text


def kv_layout(model: ModelConfig, *, kv_cache_dtype: str, tp: int, pp: int = 1) -> KVLayout:
    elem = kv_dtype_bytes(kv_cache_dtype, model.dtype_bytes)
    layers = -(-model.num_layers // max(pp, 1))
    if model.attention == "mha":
        heads = max(1, model.num_kv_heads // max(tp, 1))
        per_layer = heads * (model.head_dim + model.v_head_dim) * elem
        return KVLayout("mha", layers, per_layer, 0.0, heads, model.num_kv_heads < tp)
    latent = model.kv_lora_rank + model.qk_rope_head_dim
    if model.attention == "mla":
        return KVLayout("mla", layers, latent * elem)
    # DSA / NSA
    if elem == 1:
        scales = -(-model.kv_lora_rank // QUANT_BLOCK) * SCALE_BYTES
        per_layer = model.kv_lora_rank + scales + model.qk_rope_head_dim * 2
    else:
        per_layer = latent * elem
    index = model.index_head_dim + -(-model.index_head_dim // QUANT_BLOCK) * SCALE_BYTES
    return KVLayout("dsa", layers, float(per_layer), float(index))
