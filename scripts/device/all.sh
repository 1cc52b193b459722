#!/usr/bin/env bash
# One device call for every GPU proof: preflight (env, archscan vs cuobjdump, scan speed) and
# the supervised launch on a real transformers server whose decode hits a device-side assert.
# Each writes its own folder; what comes back is a few summaries plus one archive.
set -u
cd "$(dirname "$0")/../.."
FINAL=${OUT:-/tmp/servedoctor-device}
mkdir -p "$FINAL"
OUT=/tmp/sd-preflight timeout 300 bash scripts/device/preflight.sh >"$FINAL/preflight-console.txt" 2>&1
echo "preflight.sh exit: $?" >>"$FINAL/preflight-console.txt"
OUT=/tmp/sd-launch timeout 280 bash scripts/device/launch_gpu.sh >"$FINAL/launch-console.txt" 2>&1
echo "launch_gpu.sh exit: $?" >>"$FINAL/launch-console.txt"
cp /tmp/sd-preflight/summary.txt "$FINAL/preflight-summary.txt" 2>/dev/null
cp /tmp/sd-launch/summary.txt "$FINAL/launch-summary.txt" 2>/dev/null
tar czf "$FINAL/all.tgz" -C /tmp sd-preflight sd-launch 2>/dev/null
tail -n 40 "$FINAL/preflight-console.txt"
tail -n 60 "$FINAL/launch-console.txt"
