#!/usr/bin/env bash
# Per-token decode cost in ONNX Runtime of the exported `single` package
# against the `split` package at 1K, 4K and 16K context, on a Gemma-4-12B
# shaped attention stack (make-model preset gemma4-12b-attention), from ONNX
# Runtime's profiler. About 10 minutes and 8 GB of memory on 2 cores.
#   scripts/bench_onnx.sh [WORK_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
work=${1:-/tmp/splitdec-bench-onnx}
mkdir -p "$work"
build/splitdec make-model --preset gemma4-12b-attention --out "$work/model" >/dev/null
build/splitdec export-onnx --model "$work/model" --out "$work/single" --plan single --max-length 16448 >/dev/null
for context in 1024 4096 16384; do
  # The split buffers are sized as a runtime would size them for this
  # context (max_length = context + the steps run), not for the longest one.
  build/splitdec export-onnx --model "$work/model" --out "$work/split-$context" --plan split \
    --max-length $((context + 64)) >/dev/null
  node --expose-gc tests/onnx/profile_decode.mjs "$work/split-$context" "$work/single" --contexts "$context"
done
