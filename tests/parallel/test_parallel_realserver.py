"""``fix --parallel 2`` on a real local Ray cluster (loopback) with real `transformers serve`.

The command carries two faults (flash_attention_2 without flash_attn, ``--device cuda``
with a CPU-only torch). The session runs twice, one trial at a time and two at a time; the
parallel one must reach the same verdict through the same trials, with trials that really
overlapped in time, each on its own port, and the store must say where each trial ran.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray", reason="pip install -e '.[dev]' (fix --parallel's Ray)")

_PATH = Path(__file__).parent.parent / "realserver" / "conftest.py"
_spec = importlib.util.spec_from_file_location("servedoctor_realserver_fixtures_p", _PATH)
assert _spec is not None and _spec.loader is not None
_real = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_real)
models, offline_env, no_leftovers = _real.models, _real.offline_env, _real.no_leftovers

from servedoctor.findings.store import FindingsStore  # noqa: E402

pytestmark = [pytest.mark.realserver, pytest.mark.slow, pytest.mark.timeout(420)]


def _fix(tmp: Path, env: dict[str, str], argv: list[str], *extra: str) -> dict[str, Any]:
    tmp.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "servedoctor", "fix", "--json", "--no-report",
         "--store", str(tmp / "f.db"), "--runs-dir", str(tmp / "runs"), "--max-tokens", "4",
         "--request-timeout", "60", "--startup-timeout", "90", *extra, "--", *argv],
        env={**os.environ, **env}, capture_output=True, text=True, timeout=400, cwd=tmp,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    return dict(json.loads(proc.stdout))


def _verdict(result: dict[str, Any]) -> object:
    trials = [(t["role"], t["changes"], t["tested"], t["outcome"]) for t in result["trials"]]
    return result["outcome"], result["changes"], trials


def _intervals(runs: Path) -> list[tuple[datetime, datetime, int]]:
    out = []
    for path in runs.glob("*/run.json"):
        run = json.loads(path.read_text())
        start = datetime.fromisoformat(run["started_at"])
        end = start + timedelta(seconds=run["duration_s"])
        out.append((start, end, run["supervisor"]["pid"]))
    return sorted(out)


def test_two_trials_at_once_reach_the_sequential_verdict(
    tmp_path: Path, models: dict[str, Path], offline_env: dict[str, str], no_leftovers: None
) -> None:
    argv = _real.serve_cmd(models["healthy"], _real.free_port(), "--dtype", "float32",
                           "--attn-implementation", "flash_attention_2", "--device", "cuda")  # fmt: skip
    one = _fix(tmp_path / "one", offline_env, argv)
    two = _fix(tmp_path / "two", offline_env, argv, "--parallel", "2")
    assert one["outcome"] == "fixed"
    assert _verdict(two) == _verdict(one)
    assert two["parallel"]["width"] == 2
    assert two["parallel"]["launched"] == len(two["trials"]) + two["parallel"]["unused"]

    # some trials really ran side by side, in different Ray workers
    spans = _intervals(tmp_path / "two" / "runs")
    assert len(spans) == two["parallel"]["launched"]
    # started_at has whole seconds: overlapping means by more than one second
    overlapping = [
        (a, b)
        for i, a in enumerate(spans)
        for b in spans[i + 1 :]
        if b[0] + timedelta(seconds=1) < a[1]
    ]
    assert overlapping and all(a[2] != b[2] for a, b in overlapping)

    # the store says where each trial ran: this host, its Ray node, a port of its own
    run = FindingsStore.open(tmp_path / "two" / "f.db").run(two["session"])
    assert run is not None and len(run.trials) == len(two["trials"])
    where = [t.placement for t in run.trials]
    assert all(w and w["ray_node"] and w["host"] for w in where)
    ports = [w["port"] for w in where if w]
    assert len(set(ports)) == len(ports)
    assert str(argv[argv.index("--port") + 1]) not in map(str, ports)
    # sequential trials record their place too (the command's own port), no Ray node
    seq = FindingsStore.open(tmp_path / "one" / "f.db").run(one["session"])
    assert seq is not None
    assert {t.placement["port"] for t in seq.trials if t.placement} == {
        int(argv[argv.index("--port") + 1])
    }
    assert all(t.placement and "ray_node" not in t.placement for t in seq.trials)
