"""Memory planner: weights, KV cache tokens and CUDA-graph headroom per GPU, before launch."""

from __future__ import annotations

from servedoctor.plan.config import ModelConfig, load_model_config, parse_model_config
from servedoctor.plan.kv import KVLayout, kv_layout
from servedoctor.plan.planner import Plan, PlanInputs, make_plan, weights_for

__all__ = [
    "KVLayout",
    "ModelConfig",
    "Plan",
    "PlanInputs",
    "kv_layout",
    "load_model_config",
    "make_plan",
    "parse_model_config",
    "weights_for",
]
