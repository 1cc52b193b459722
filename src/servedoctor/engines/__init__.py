"""What servedoctor knows about each inference server, kept as data."""

from __future__ import annotations

from servedoctor.engines.spec import (
    EngineSpec,
    PhaseMarker,
    all_engines,
    build_of,
    engine_distribution,
    engine_for_command,
    engine_for_lines,
    get_engine,
)

__all__ = [
    "EngineSpec",
    "PhaseMarker",
    "all_engines",
    "build_of",
    "engine_distribution",
    "engine_for_command",
    "engine_for_lines",
    "get_engine",
]
