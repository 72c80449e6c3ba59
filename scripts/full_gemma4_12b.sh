#!/usr/bin/env bash
# The full gemma4-12b preset (48 layers, real shapes, random weights) end to
# end on one machine: written in bf16 (24.4 GB), quantized to q4 and q8,
# then for each: a ~1K-token prompt with an image and 64 generated tokens
# (wall time and peak RSS from /usr/bin/time), and decode at 1K / 4K context
# against the weight floor (bench --only folder). Needs ~45 GB of disk under
# WORK (default /tmp/splitdec-full-12b) and about 15 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${SPLITDEC:-build/splitdec}
WORK=${WORK:-/tmp/splitdec-full-12b}
mkdir -p "$WORK"
timed() { /usr/bin/time -f "  wall %e s, peak RSS %M kB" "$@"; }
[ -f "$WORK/g4/model.safetensors" ] || timed "$BIN" make-model --preset gemma4-12b --out "$WORK/g4"
prompt=$(python3 -c "
import random
random.seed(1)
w='the quick brown fox jumps over a lazy dog while seven cats watch from the old wooden fence near river bank'.split()
print(' '.join(random.choice(w) for _ in range(345)))")
for q in q4 q8; do
  [ -f "$WORK/g4-$q/model.safetensors" ] || timed "$BIN" quantize --model "$WORK/g4" --out "$WORK/g4-$q" --weights $q
  echo "== generate, $q"
  timed "$BIN" generate --model "$WORK/g4-$q" --prompt "$prompt <image:data/demo.png> Describe it." --image-tokens 280 \
    --max-new-tokens 64 2>&1 | grep -v '^\[0\] t'
  "$BIN" bench --only folder --model "$WORK/g4-$q" | grep -E 'decode at|peak RSS|bandwidth:'
done
