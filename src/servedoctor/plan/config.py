"""What the planner needs from a model's ``config.json``, read without transformers."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from servedoctor.errors import UserError

__all__ = ["ModelConfig", "load_model_config"]

_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1, "fp8": 1}


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """Shapes that decide weight and KV cache sizes. ``attention`` is ``mha`` (also GQA/MQA),
    ``mla`` (DeepSeek latent attention) or ``dsa`` (MLA plus the DeepSeek sparse-attention
    indexer, called NSA in SGLang)."""

    model_type: str
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    v_head_dim: int
    intermediate_size: int
    vocab_size: int
    max_context: int
    dtype_bytes: int = 2
    attention: str = "mha"
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    index_head_dim: int = 0
    num_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate_size: int = 0
    shared_experts: int = 0
    dense_layers: int = 0
    tie_word_embeddings: bool = False
    quant_method: str | None = None

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0


def _get(cfg: dict[str, Any], *names: str, default: Any = None) -> Any:
    for name in names:
        if cfg.get(name) is not None:
            return cfg[name]
    return default


def parse_model_config(raw: dict[str, Any]) -> ModelConfig:
    """Build a :class:`ModelConfig` from a parsed ``config.json`` (multimodal configs are
    read through their ``text_config``)."""
    cfg = dict(raw.get("text_config") or {}) or dict(raw)
    for key in ("quantization_config", "torch_dtype", "dtype", "model_type"):
        if key not in cfg and key in raw:
            cfg[key] = raw[key]
    try:
        layers = int(_get(cfg, "num_hidden_layers", "n_layer", "num_layers"))
        hidden = int(_get(cfg, "hidden_size", "n_embd", "d_model"))
        heads = int(_get(cfg, "num_attention_heads", "n_head"))
        vocab = int(cfg["vocab_size"])
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"config.json lacks a field the planner needs: {exc}") from None
    kv_heads = int(_get(cfg, "num_key_value_heads", "num_kv_heads", default=heads))
    head_dim = int(_get(cfg, "head_dim", default=hidden // heads))
    if cfg.get("kv_lora_rank") and cfg.get("qk_nope_head_dim") is not None:
        head_dim = int(cfg["qk_nope_head_dim"]) + int(cfg.get("qk_rope_head_dim") or 0)
    kv_lora = int(_get(cfg, "kv_lora_rank", default=0) or 0)
    index_dim = int(_get(cfg, "index_head_dim", default=0) or 0)
    attention = "dsa" if kv_lora and index_dim else "mla" if kv_lora else "mha"
    dtype = str(_get(cfg, "torch_dtype", "dtype", default="bfloat16")).replace("torch.", "")
    quant = cfg.get("quantization_config") or {}
    experts = int(_get(cfg, "n_routed_experts", "num_experts", "num_local_experts", default=0))
    return ModelConfig(
        model_type=str(cfg.get("model_type", "unknown")),
        num_layers=layers,
        hidden_size=hidden,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        v_head_dim=int(_get(cfg, "v_head_dim", default=head_dim)),
        intermediate_size=int(_get(cfg, "intermediate_size", "ffn_dim", default=4 * hidden)),
        vocab_size=vocab,
        max_context=int(_get(cfg, "max_position_embeddings", "seq_length", default=4096)),
        dtype_bytes=_DTYPE_BYTES.get(dtype, 2),
        attention=attention,
        kv_lora_rank=kv_lora,
        q_lora_rank=int(_get(cfg, "q_lora_rank", default=0) or 0),
        qk_nope_head_dim=int(_get(cfg, "qk_nope_head_dim", default=0) or 0),
        qk_rope_head_dim=int(_get(cfg, "qk_rope_head_dim", default=0) or 0),
        index_head_dim=index_dim,
        num_experts=experts,
        experts_per_token=int(_get(cfg, "num_experts_per_tok", "moe_topk", default=0) or 0),
        moe_intermediate_size=int(_get(cfg, "moe_intermediate_size", default=0) or 0),
        shared_experts=int(_get(cfg, "n_shared_experts", default=0) or 0),
        dense_layers=int(_get(cfg, "first_k_dense_replace", default=0) or 0),
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        quant_method=quant.get("quant_method") if isinstance(quant, dict) else None,
    )


def load_model_config(model_dir: Path) -> ModelConfig:
    path = model_dir / "config.json" if model_dir.is_dir() else model_dir
    if not path.is_file():
        raise UserError(f"no config.json at {path}")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"cannot read {path}: {exc}") from None
    if not isinstance(raw, dict):
        raise UserError(f"{path} is not a JSON object")
    return parse_model_config(raw)
