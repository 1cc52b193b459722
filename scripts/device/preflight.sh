#!/usr/bin/env bash
# Issue 4 on the H200: `servedoctor env`, archscan over the real torch libraries checked
# against cuobjdump on every library, the nvcc-built test libraries with cuobjdump, the scan
# benchmark and two preflight verdicts. Run from the repo root with the wheels carried:
#   run(command="bash scripts/device/preflight.sh", carry=[".whl"])
# Everything it prints also lands in $OUT/ (env.txt, env.json, archscan_torch.jsonl,
# compare_torch.txt, pytest_env.txt, bench.txt, preflight.txt, summary.txt).
set -u
OUT=${OUT:-/tmp/servedoctor-preflight}
mkdir -p "$OUT"
PY=${PY:-python3}
export PYTHONUNBUFFERED=1
status=0
note() { echo "== $*" | tee -a "$OUT/summary.txt"; }

# 1. The packages the device lacks (pydantic & co., SQLAlchemy), one wheel of each.
wheels=()
for name in pydantic pydantic_core annotated_types typing_inspection typing_extensions sqlalchemy; do
  found=$(ls "${WHEELS:-.whl}/${name}"-[0-9]*.whl 2>/dev/null | sort -V | tail -1)
  if [ -n "$found" ]; then wheels+=("$found"); else note "no wheel for $name in ${WHEELS:-.whl}/"; fi
done
if [ ${#wheels[@]} -gt 0 ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site "${wheels[@]}" || { note "wheel install failed"; exit 1; }
fi
export PYTHONPATH="$PWD/src:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
SD=("$PY" -m servedoctor)

# 2. env, human and JSON.
note "servedoctor env"
"${SD[@]}" env 2>&1 | tee "$OUT/env.txt"
"${SD[@]}" env --json >"$OUT/env.json" 2>>"$OUT/env.txt" || { note "env --json failed"; status=1; }

# 3. archscan over torch's libraries, judged for sm_90.
TORCH_LIB=${TORCH_LIB:-$($PY -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))' 2>/dev/null)}
if [ -z "$TORCH_LIB" ] || [ ! -d "$TORCH_LIB" ]; then
  note "torch lib folder not found"; exit 1
fi
note "archscan --json --gpu sm_90 $TORCH_LIB"
"${SD[@]}" archscan --json --gpu sm_90 "$TORCH_LIB" >"$OUT/archscan_torch.jsonl"
echo "archscan exit code: $? (0: every library runnable on sm_90)" | tee -a "$OUT/summary.txt"
cat "$OUT/archscan_torch.jsonl"
"${SD[@]}" archscan --gpu sm_120 "$TORCH_LIB" | tail -n 1 | tee -a "$OUT/summary.txt"

# 4. The same libraries through cuobjdump: must agree on every one.
note "archscan vs cuobjdump --list-elf --list-ptx, torch"
$PY scripts/device/archscan_vs_cuobjdump.py "$TORCH_LIB" --jobs 12 | tee "$OUT/compare_torch.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
tail -n 1 "$OUT/compare_torch.txt" >>"$OUT/summary.txt"
NV=$($PY -c 'import nvidia; print(list(nvidia.__path__)[0])' 2>/dev/null)
if [ -n "$NV" ] && [ -d "$NV" ] && [ "$SECONDS" -lt 200 ]; then
  note "archscan vs cuobjdump, the nvidia-* CUDA wheels ($NV)"
  $PY scripts/device/archscan_vs_cuobjdump.py "$NV" --jobs 12 --timeout 240 >"$OUT/compare_nvidia.txt"
  [ $? -eq 0 ] || status=1
  grep -v '^agree' "$OUT/compare_nvidia.txt" | tail -n 20
  tail -n 1 "$OUT/compare_nvidia.txt" >>"$OUT/summary.txt"
fi

# 4b. The PTX ISA versions read from fatbin headers against the PTX text's .version lines,
#     and the judgement of PTX against this machine's driver (ptx_too_new when older).
note "PTX ISA: archscan vs cuobjdump -ptx, torch"
$PY scripts/device/ptx_isa_vs_cuobjdump.py "$TORCH_LIB" --jobs 12 --timeout 150 | tee "$OUT/ptx_isa_torch.txt" | tail -n 12
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
tail -n 1 "$OUT/ptx_isa_torch.txt" >>"$OUT/summary.txt"
# sm_130: a GPU newer than every SASS torch carries, so only its PTX can serve it
note "archscan --gpu sm_130 (this driver), then --cuda-driver 12.0"
"${SD[@]}" archscan --gpu sm_130 "$TORCH_LIB" | grep -E "^  (ptx_jit|ptx_too_new)" | head -n 2 | tee -a "$OUT/summary.txt"
"${SD[@]}" archscan --gpu sm_130 --cuda-driver 12.0 "$TORCH_LIB" | grep -E "^  ptx_too_new" | head -n 2 | tee -a "$OUT/summary.txt"

# 5. The nvcc-built test libraries (sm_80, sm_90a, sm_90+PTX, sm_120, several compressed):
#    scan, judgement for sm_80...sm_121, and cuobjdump agreement (not skipped here).
note "pytest tests/env (nvcc + cuobjdump)"
if command -v nvcc >/dev/null; then
  $PY -m pytest -q -p no:cacheprovider tests/env 2>&1 | tee "$OUT/pytest_env.txt" | tail -n 15
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  tail -n 1 "$OUT/pytest_env.txt" >>"$OUT/summary.txt"
else
  note "nvcc not found: test libraries not built"
fi

# 6. Speed: every .so of torch, against reading the same bytes and against cuobjdump.
note "bench/archscan_speed.py"
bench_args=()
[ "$SECONDS" -lt 300 ] && bench_args=(--cuobjdump)
$PY bench/archscan_speed.py "${bench_args[@]}" 2>&1 | tee "$OUT/bench.txt"
grep '^ratio' "$OUT/bench.txt" >>"$OUT/summary.txt"

# 7. Preflight verdicts on this GPU: a blocking flag (exit 1) and a clean command (exit 0).
note "preflight"
{
  "${SD[@]}" preflight -- python3 -m sglang.launch_server --model-path m --attention-backend fa4
  echo "exit code: $? (expected 1: ARCH104 fa4 on sm_90)"
  "${SD[@]}" preflight -- python3 -m sglang.launch_server --model-path m --attention-backend fa3
  echo "exit code: $? (expected 0)"
} 2>&1 | tee "$OUT/preflight.txt"
grep '^exit code' "$OUT/preflight.txt" >>"$OUT/summary.txt"

note "done, status $status"
cat "$OUT/summary.txt"
exit $status
