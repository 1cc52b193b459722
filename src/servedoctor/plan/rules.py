"""The engines' own rules from a memory fraction to a KV token count, and the headroom the
rest of the GPU must keep for activations and CUDA graphs (numbers in ``data/engines.yaml``).

SGLang (``profile_max_num_token``)::

    total = free memory after CUDA/NCCL init          (min over ranks)
    avail = free memory after the weights load
    rest  = avail - total * (1 - mem_fraction_static)
    tokens = rest // kv_bytes_per_token, rounded down to the page size

vLLM (``determine_available_memory``)::

    kv = capacity * gpu_memory_utilization - weights - peak activations - non-torch memory
    tokens = kv // (block_size * kv_bytes_per_token) * block_size

CUDA graphs are captured after the KV cache is allocated, so they must fit in what is left.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from servedoctor.datafile import load_yaml
from servedoctor.plan.config import ModelConfig

__all__ = ["EngineRules", "activation_bytes_per_token", "load_rules"]

GIB = 1024**3


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MemoryDefaults(_Strict):
    below_gb: float
    chunked_prefill: int
    graph_bs: tuple[int, int]


class SGLangRules(_Strict):
    context_gib: float
    nccl_gib_per_rank: float
    default_page_size: int
    dsa_page_size: int
    defaults_by_memory: list[MemoryDefaults]

    def defaults(self, capacity_gib: float, tp: int) -> tuple[int, int]:
        """(chunked_prefill_size, cuda_graph_max_bs) SGLang picks for this GPU."""
        gb = capacity_gib * GIB / 1e9
        for row in self.defaults_by_memory:
            if gb < row.below_gb:
                return row.chunked_prefill, row.graph_bs[1 if tp >= 4 else 0]
        last = self.defaults_by_memory[-1]
        return last.chunked_prefill, last.graph_bs[1 if tp >= 4 else 0]

    def default_fraction(self, capacity_gib: float, tp: int, pp: int = 1) -> float:
        """SGLang's automatic --mem-fraction-static (server_args.py)."""
        chunk, graph_bs = self.defaults(capacity_gib, tp)
        reserved = 512 + 1.5 * max(chunk, 2048) + 2 * graph_bs + 1024 * tp * pp / 8
        capacity_mb = capacity_gib * 1024
        if capacity_gib * GIB / 1e9 > 60:
            reserved = max(reserved, 10240)
        return round((capacity_mb - reserved) / capacity_mb, 3)


class VLLMRules(_Strict):
    non_torch_gib: float
    nccl_gib: float
    block_size: int
    large_gpu_gib: float
    batched_tokens: tuple[int, int]
    max_num_seqs: tuple[int, int]


class Headroom(_Strict):
    runtime_gib: float
    activation_hidden_buffers: int
    mlp_buffers: int
    logits_buffers: int
    profile_logits_buffers: int


class EngineRules(_Strict):
    sglang: SGLangRules
    vllm: VLLMRules
    headroom: Headroom


@lru_cache(maxsize=1)
def load_rules() -> EngineRules:
    path = Path(__file__).parent / "data" / "engines.yaml"
    return EngineRules.model_validate(load_yaml(path))


def activation_bytes_per_token(model: ModelConfig, *, tp: int, headroom: Headroom) -> float:
    """Bytes of live activations per token in one forward pass on one GPU (bf16)."""
    act = 2
    hidden = headroom.activation_hidden_buffers * model.hidden_size * act
    if model.is_moe:
        inter = model.moe_intermediate_size / tp
        # routed tokens carry their hidden state and gate/up/act buffers per expert
        mlp = model.experts_per_token * (model.hidden_size + headroom.mlp_buffers * inter) * act
    else:
        mlp = headroom.mlp_buffers * (model.intermediate_size / tp) * act
    return hidden + mlp


def decode_bytes_per_seq(model: ModelConfig, *, tp: int, context: int, headroom: Headroom) -> float:
    """Extra bytes a decoded sequence needs in a CUDA graph: logits and, for DeepSeek sparse
    attention, the indexer's fp32 scores over the whole context."""
    logits = headroom.logits_buffers * model.vocab_size * 4
    indexer = headroom.logits_buffers * context * 4 if model.attention == "dsa" else 0
    return activation_bytes_per_token(model, tp=tp, headroom=headroom) + logits + indexer
