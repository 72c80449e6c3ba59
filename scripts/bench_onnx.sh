#!/usr/bin/env bash
# Per-token decode cost in ONNX Runtime of the exported `single` package
# against the `split` package at 1K, 4K and 16K context, on a Gemma-4-12B
# shaped attention stack (make-model preset gemma4-12b-attention), from ONNX
# Runtime's profiler. Needs about 8 GB of memory and 10 minutes on 2 cores.
#   scripts/bench_onnx.sh [WORK_DIR] [extra profile_decode.mjs flags]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
work=${1:-/tmp/splitdec-bench-onnx}
shift || true
mkdir -p "$work"
build/splitdec make-model --preset gemma4-12b-attention --out "$work/model" >/dev/null
# Room for the longest context plus the warm-up and measured steps.
build/splitdec export-onnx --model "$work/model" --out "$work/split" --plan split --max-length 16448
build/splitdec export-onnx --model "$work/model" --out "$work/single" --plan single --max-length 16448
node --expose-gc tests/onnx/profile_decode.mjs "$work/split" "$work/single" "$@"
