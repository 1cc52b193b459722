"""Wall time of a real `servedoctor fix` session with `--parallel 2` against one trial at a time.

The scenarios are the real-server fix tests' commands (tests/realserver): a tiny random
Llama served by the real `transformers serve` on CPU, offline, with one or two flags that
really break it here. Each session runs as the CLI does (`servedoctor fix --json`), so the
parallel wall time includes starting the session's local Ray cluster on loopback. The
verdict and the trials must be the same both ways (checked); the parallel session may also
launch trials ahead that the search never asks for ("unused").

Run: .venv/bin/python bench/parallel_fix.py [--runs N]   (needs the realserver and dev
extras; ~4 min for --runs 1)
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "tests" / "realserver" / "tinymodels.py"
TRANSFORMERS = Path(sys.executable).parent / "transformers"
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
           "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}  # fmt: skip
SCENARIOS = {
    "one bad flag": ["--dtype", "bfloat16", "--attn-implementation", "flash_attention_2",
                     "--continuous-batching"],
    "two bad flags": ["--dtype", "float32", "--attn-implementation", "flash_attention_2",
                      "--device", "cuda"],
}  # fmt: skip


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _session(
    work: Path, model: Path, flags: list[str], width: int, env: dict[str, str]
) -> tuple[float, dict[str, Any]]:
    work.mkdir()
    argv = [
        str(TRANSFORMERS),
        "serve",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(_port()),
        *flags,
    ]
    cmd = [sys.executable, "-m", "servedoctor", "fix", "--json", "--no-report",
           "--store", str(work / "f.db"), "--runs-dir", str(work / "runs"), "--max-tokens", "4",
           "--startup-timeout", "90", "--parallel", str(width), "--", *argv]  # fmt: skip
    started = time.monotonic()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=work, timeout=600)
    wall = time.monotonic() - started
    if proc.returncode not in (0, 1):
        raise SystemExit(f"fix failed ({proc.returncode}): {proc.stderr[-2000:]}")
    try:
        return wall, json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise SystemExit(
            f"fix printed no JSON ({proc.returncode}): {proc.stdout[-500:]!r} {proc.stderr[-2000:]}"
        ) from None


def _verdict(result: dict[str, Any]) -> object:
    return (result["outcome"], result["changes"],
            [(t["role"], t["changes"], t["outcome"]) for t in result["trials"]])  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sd-parallel-") as tmp:
        root = Path(tmp)
        env = {**os.environ, **OFFLINE, "HF_HOME": str(root / "hf")}
        subprocess.run([sys.executable, str(TINY), "set", str(root / "models")], env=env,
                       check=True, capture_output=True)  # fmt: skip
        model = root / "models" / "healthy"
        print(
            "| scenario | trials | --parallel 1 | --parallel 2 | unused launches | same verdict |"
        )
        print("| --- | --- | --- | --- | --- | --- |")
        for name, flags in SCENARIOS.items():
            walls: dict[int, list[float]] = {1: [], 2: []}
            results: dict[int, dict[str, Any]] = {}
            for r in range(args.runs):
                for width in (1, 2):
                    wall, results[width] = _session(
                        root / f"{name[:3]}-{width}-{r}", model, flags, width, env
                    )
                    walls[width].append(wall)
            same = _verdict(results[1]) == _verdict(results[2])
            if not same:  # keep both sessions' JSON to see where they part
                for width, result in results.items():
                    out = Path(tempfile.gettempdir()) / f"parallel_fix-{name[:3]}-{width}.json"
                    out.write_text(json.dumps(result, indent=1))
            print(f"| {name} | {len(results[1]['trials'])} | "
                  f"{statistics.median(walls[1]):.1f} s | {statistics.median(walls[2]):.1f} s | "
                  f"{results[2]['parallel']['unused']} | {'yes' if same else 'NO'} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
