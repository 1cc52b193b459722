"""A run folder made from a real log: the engine's own timeline replays the log's lines (so
phases and the memory figures come from the real markers), the real diagnosis is recorded,
and telemetry samples are drawn around the phases."""

from __future__ import annotations

import json
import math
from pathlib import Path

from servedoctor.diagnose import diagnose_path
from servedoctor.engines import get_engine
from servedoctor.launch.timeline import Timeline


def make_run(
    log: Path,
    run_dir: Path,
    *,
    engine: str,
    command: list[str],
    samples: int = 60,
    gpus: int = 2,
    env: dict[str, str] | None = None,
) -> dict[str, object]:
    run_dir.mkdir(parents=True)
    text = log.read_text(encoding="utf-8", errors="replace")
    (run_dir / "server.log").write_text(text, encoding="utf-8")
    lines = text.splitlines()
    timeline = Timeline(get_engine(engine), t0=0.0)
    step = 0.5
    for i, line in enumerate(lines, start=1):
        timeline.feed(i, line, i * step)
    end = len(lines) * step + step
    phases = timeline.spans(now=end)
    d = diagnose_path(run_dir / "server.log", engine=engine)
    failed = d.error_class is not None
    with (run_dir / "telemetry.jsonl").open("w", encoding="utf-8") as f:
        for k in range(samples):
            t = end * k / max(1, samples - 1)
            rise = 1 - math.exp(-3 * t / end)
            f.write(
                json.dumps(
                    {
                        "t": round(t, 3),
                        "rss_mib": 500 + 3000 * rise,
                        "cpu_pct": 100 * (k % 3),
                        "gpu_mib": [80000 * rise + 500 * g for g in range(gpus)],
                    }
                )
                + "\n"
            )
    record = {
        "schema": 1,
        "outcome": "failed" if failed else "healthy",
        "engine": engine,
        "command": command,
        "env_overrides": env or {},
        "started_at": "2026-03-02T14:05:01+00:00",
        "run_dir": str(run_dir),
        "phases": [p.to_dict() for p in phases],
        "failure": {
            "kind": "process_exit",
            "phase": phases[-1].name,
            "detail": "server process ended: exit 1",
            "at_s": end,
            "line": None,
        }
        if failed
        else None,
        "diagnosis": d.to_dict() if failed else None,
        "progress": {
            k: {"done": v.done, "total": v.total, "percent": v.percent}
            for k, v in timeline.progress.items()
        },
        "memory_gib": dict(timeline.memory_gib),
        "warnings": [],
        "duration_s": end,
    }
    (run_dir / "run.json").write_text(json.dumps(record, indent=2), encoding="utf-8")
    (run_dir / "machine.json").write_text(
        json.dumps({"gpus": ["NVIDIA RTX PRO 6000 · sm_120 · 95 GiB"] * gpus, "driver": "580.65"}),
        encoding="utf-8",
    )
    return record
