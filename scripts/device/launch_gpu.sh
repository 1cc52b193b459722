#!/usr/bin/env bash
# GPU proof for `servedoctor launch` (issue 3), run from the repo root on the H200:
#   device run: bash scripts/device/launch_gpu.sh      carry: [".whl"]
# transformers serve 5.24.0 (wheels carried in .whl/, see shared/engines/REAL-SERVERS.md)
# serves a tiny random GPT-2 whose position table (n_positions=32) is shorter than
# prompt + max_tokens: prefill passes, decode triggers a genuine device-side assert.
# `servedoctor launch --json --max-tokens 64` must report device_assert / decode, show that
# the next request fails, stop the whole tree and show the GPU memory released.
# Results go to $OUT: summary.txt (PASS/FAIL per check), launch.json, server.log, run.json,
# launch.stderr, nvidia-smi.txt. Exit 0 when every check passes.
# On a CPU box the logic can be tried with: PY=.venv/bin/python DEVICE=cpu bash $0
set -u -o pipefail
OUT=${OUT:-/tmp/launch-gpu-out}
PY=${PY:-python3}
DEVICE=${DEVICE:-cuda}
PORT=${PORT:-18777}
mkdir -p "$OUT"
ROOT=$(pwd)
WORK=$(mktemp -d /tmp/launch-gpu.XXXXXX)

if ls .whl/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$WORK/site" .whl/*.whl || { echo "wheel install failed"; exit 1; }
  export PYTHONPATH="$WORK/site:$ROOT/src"
else
  export PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}"
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HOME="$WORK/hf" PYTHONUNBUFFERED=1

smi() {
  echo "== nvidia-smi $1"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=index,name,memory.used,memory.total --format=csv
    nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
  else
    echo "(no nvidia-smi)"
  fi
}

{
  echo "python: $("$PY" -c 'import sys; print(sys.version.split()[0])')"
  "$PY" -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.cuda.is_available(), "transformers", transformers.__version__)'
} > "$OUT/summary.txt" 2>&1

"$PY" tests/realserver/tinymodels.py gpt2 "$WORK/gpt2" --n-positions 32 > /dev/null 2>&1 \
  || { echo "model build failed" | tee -a "$OUT/summary.txt"; exit 1; }

smi "before launch" > "$OUT/nvidia-smi.txt"
START=$(date +%s.%N)
"$PY" -m servedoctor launch --exit-after-smoke --json --max-tokens 64 --request-timeout 120 --grace 10 \
  --stall-timeout all=300 --runs-dir "$WORK/runs" -- \
  "$PY" -m transformers.cli.transformers serve "$WORK/gpt2" --device "$DEVICE" \
  --host 127.0.0.1 --port "$PORT" \
  > "$OUT/launch.json" 2> "$OUT/launch.stderr"
RC=$?
END=$(date +%s.%N)
smi "after teardown" >> "$OUT/nvidia-smi.txt"
RUN_DIR=$(ls -d "$WORK"/runs/*/ | head -1)
cp "$RUN_DIR/server.log" "$RUN_DIR/run.json" "$OUT/" 2>/dev/null

RC=$RC START=$START END=$END PORT=$PORT "$PY" - "$OUT" >> "$OUT/summary.txt" 2>&1 <<'PYEOF'
import json, os, sys
from pathlib import Path

out = Path(sys.argv[1])
rc = int(os.environ["RC"])
print(f"servedoctor launch exit status: {rc} (wall {float(os.environ['END']) - float(os.environ['START']):.1f} s)")
try:
    d = json.loads((out / "launch.json").read_text())
except Exception as exc:
    print(f"FAIL no JSON from servedoctor launch: {exc}")
    sys.exit(1)
log = (out / "server.log").read_text(errors="replace") if (out / "server.log").exists() else ""
diag = d.get("diagnosis") or {}
smoke = d.get("smoke") or {}
live = d.get("liveness") or {}
gpu = d.get("gpu") or {}
checks = [
    ("exit status 1 (failed)", rc == 1),
    ("outcome failed", d.get("outcome") == "failed"),
    ("prefill passed: tokens streamed before the failure", (smoke.get("tokens") or 0) > 0),
    ("smoke request failed (streamed, so the error ends the stream)", smoke.get("ok") is False),
    ("device-side assert in server.log", "device-side assert triggered" in log),
    ("kernel assertion lines in server.log", "Assertion" in log),
    ("diagnosis error_class device_assert", diag.get("error_class") == "device_assert"),
    ("diagnosis phase decode", diag.get("phase") == "decode"),
    ("the next request fails (liveness not ok)", live.get("ok") is False),
    ("no process of the run left", d.get("leftover_processes") == 0),
    ("GPU memory released (NVML)", gpu.get("released") is True),
]
for name, ok in checks:
    print(f"{'PASS' if ok else 'FAIL'} {name}")
print("failure:", json.dumps(d.get("failure")))
print("smoke:", json.dumps({k: smoke.get(k) for k in ("ok", "status", "tokens", "ttft_s", "latency_s", "error")}))
print("liveness:", json.dumps({k: live.get(k) for k in ("ok", "status", "error")}))
print("diagnosis:", json.dumps({k: diag.get(k) for k in ("error_class", "phase", "component", "culprit", "summary")}))
print("gpu:", json.dumps(gpu), "gpu_peak_mib:", d.get("gpu_peak_mib"))
print("phases:", " → ".join(f"{p['name']}({p['start']}-{p['end']})" for p in d.get("phases", [])))
asserts = [l for l in log.splitlines() if "Assertion" in l]
print(f"assertion lines in log: {len(asserts)}; first: {asserts[0][:200] if asserts else '-'}")
sys.exit(0 if all(ok for _, ok in checks) else 1)
PYEOF
STATUS=$?
cat "$OUT/summary.txt"
cat "$OUT/nvidia-smi.txt"
rm -rf "$WORK"
exit $STATUS
