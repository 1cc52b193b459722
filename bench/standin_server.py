"""A stand-in for an SGLang server, for the fix scenario benchmark (bench/fix_scenarios.py).

It reads a scenario (JSON, path in ``$STANDIN_SCENARIO``): faults, each a real corpus case
with trigger settings, and settings the server needs. Given its own argv and environment:
- if a fault's trigger settings are all present (flag with that value, or env var with that
  value), it prints that case's real log (``corpus/dev/<case>/log.txt``) and exits with the
  case's exit code — faults are checked in the order of their case's phase, as a real
  server would hit the earliest one first;
- if a required setting is missing, it replays that requirement's case log the same way;
- otherwise it prints a healthy SGLang start and exits 0 (the bench's launcher treats the
  ready line as a healthy start; this stand-in does not serve HTTP).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

PHASES = ["install", "startup", "load", "memory_setup", "graph_capture", "warmup",
          "prefill", "decode", "serving", "shutdown"]  # fmt: skip

HEALTHY = """\
[2025-10-16 09:06:20] server_args=ServerArgs(model_path='{model}', port={port})
[2025-10-16 09:06:22] Init torch distributed begin.
[2025-10-16 09:06:23] Init torch distributed ends. mem usage=0.00 GB
[2025-10-16 09:06:24] Load weight begin. avail mem=78.50 GB
[2025-10-16 09:06:31] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=63.20 GB, mem usage=15.30 GB.
[2025-10-16 09:06:31] KV Cache is allocated. #tokens: 412345, K size: 24.60 GB, V size: 24.60 GB
[2025-10-16 09:06:31] Memory pool end. avail mem=13.10 GB
[2025-10-16 09:06:32] Capture cuda graph begin. This can take up to several minutes. avail mem=13.00 GB
[2025-10-16 09:06:40] Capture cuda graph end. Time elapsed: 8.12 s. mem usage=0.40 GB. avail mem=12.60 GB.
[2025-10-16 09:06:41] max_total_num_tokens=412345, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=2048, context_len=32768, available_gpu_mem=12.60 GB
[2025-10-16 09:06:41] INFO:     Uvicorn running on http://127.0.0.1:{port} (Press CTRL+C to quit)
[2025-10-16 09:06:43] INFO:     127.0.0.1:40000 - "POST /generate HTTP/1.1" 200 OK
[2025-10-16 09:06:43] The server is fired up and ready to roll!
"""


def settings(argv: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok.startswith("--") and "=" in tok:
            name, _, value = tok.partition("=")
            out[name] = value
        elif tok.startswith("--"):
            has_value = i + 1 < len(argv) and not argv[i + 1].startswith("--")
            out[tok] = argv[i + 1] if has_value else ""
            i += has_value
        i += 1
    return out


def triggered(trigger: dict[str, dict[str, str]], flags: dict[str, str]) -> bool:
    for name, value in trigger.get("flags", {}).items():
        if flags.get(name) != value:
            return False
    return all(os.environ.get(name) == value for name, value in trigger.get("env", {}).items())


def replay(corpus: Path, case: str, exit_code: int) -> int:
    sys.stderr.write((corpus / case / "log.txt").read_text(encoding="utf-8", errors="replace"))
    sys.stderr.flush()
    return exit_code


def main(argv: list[str]) -> int:
    scenario = json.loads(Path(os.environ["STANDIN_SCENARIO"]).read_text(encoding="utf-8"))
    corpus = Path(scenario["corpus"])
    flags = settings(argv)
    for need in scenario.get("requires", []):
        if need["flag"] not in flags:
            return replay(corpus, need["case"], need.get("exit_code", 1))
    faults = sorted(scenario["faults"], key=lambda f: PHASES.index(f["phase"]))
    for fault in faults:
        if triggered(fault["trigger"], flags):
            return replay(corpus, fault["case"], fault.get("exit_code", 1))
    sys.stdout.write(HEALTHY.format(model=flags.get("--model-path", "?"),
                                    port=flags.get("--port", "30000")))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
