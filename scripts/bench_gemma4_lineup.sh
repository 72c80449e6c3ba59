#!/usr/bin/env bash
# The Gemma-4 checkpoints beyond the dense ones, on random weights with the
# real shapes: E2B (all 35 layers, bf16) and 26B-A4B (its first
# $A4B_LAYERS layers, loaded as q8 and as q4). Each row: a 512-token prefill
# against the GEMM peak, decode at 1K / 4K context against the floor of the
# bytes a token reads (E2B: per-layer rows included, the mapped table
# excluded; 26B-A4B: the router's 8 of 128 experts), peak RSS beside the
# resident weights. Needs about 12 GB of disk for E2B and 6 GB for the
# 26B-A4B layers; the folders are kept in $WORK for reruns.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/splitdec}
WORK=${WORK:-/tmp/splitdec-gemma4-lineup}
A4B_LAYERS=${A4B_LAYERS:-6}
mkdir -p "$WORK"
[ -f "$WORK/e2b/config.json" ] || "$BIN" make-model --preset gemma4-e2b --out "$WORK/e2b"
[ -f "$WORK/a4b/config.json" ] || "$BIN" make-model --preset gemma4-26b-a4b --layers "$A4B_LAYERS" --out "$WORK/a4b"
grep -E "^(model name|flags)" /proc/cpuinfo | head -2 | cut -c1-200
"$BIN" bench --only folder -m "$WORK/e2b" --json "$WORK/e2b-bf16.json"
for w in q8 q4; do
  "$BIN" bench --only folder -m "$WORK/a4b" --weights "$w" --json "$WORK/a4b-$w.json"
done
