#!/usr/bin/env bash
# The main job on this machine's CPU, for `make demo`: a tiny random Llama (built offline,
# ~100k parameters) served by a real `transformers serve`, launched under supervision, then
# broken with a flag this machine cannot run and handed to `servedoctor fix`.
# Usage: scripts/demo/live.sh [VENV_BIN]   (default .venv/bin)
set -euo pipefail
BIN=${1:-.venv/bin}
DEMO=$(mktemp -d "${TMPDIR:-/tmp}/servedoctor-demo.XXXXXX")
trap 'rm -rf "$DEMO"' EXIT
# offline, a private cache: the demo never reaches the network
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HOME="$DEMO/hf" OMP_NUM_THREADS=1
export TOKENIZERS_PARALLELISM=false
PORT=$("$BIN/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
MODEL="$DEMO/tiny-llama"

echo "== building a tiny random Llama in $MODEL (offline, a few seconds)"
"$BIN/python" tests/realserver/tinymodels.py llama "$MODEL" >/dev/null

echo "== servedoctor launch: start it, follow its phases, smoke-test it (--exit-after-smoke: return)"
"$BIN/servedoctor" launch --exit-after-smoke --max-tokens 8 --grace 3 \
	--runs-dir "$DEMO/runs" -- \
	"$BIN/transformers" serve "$MODEL" --host 127.0.0.1 --port "$PORT"

echo "== servedoctor fix: the same server with flash_attention_2, which this machine cannot run"
"$BIN/servedoctor" fix --max-tokens 4 --store "$DEMO/findings.db" \
	--runs-dir "$DEMO/runs" -- \
	"$BIN/transformers" serve "$MODEL" --host 127.0.0.1 --port "$PORT" \
	--dtype float32 --attn-implementation flash_attention_2
