#!/usr/bin/env bash
# Prompt processing of the same 1000-token prompt in ONNX Runtime (the
# exported split package, run as ONNX Runtime GenAI runs it:
# tests/onnx/time_prompt.mjs, the time inside ONNX Runtime, best of ROUNDS
# after a first run of the shape) and in
# splitdec (best of ROUNDS, default kernels and SPLITDEC_EXACT_GEMM=1, the
# f32 products the exported graphs compute), 2 threads each. Model: the
# gemma3-1b preset cut to LAYERS layers (its 262144-token LM head is what
# the prompt stage's last-row logits save). About 2 GB of disk and 3
# minutes with the defaults. WEIGHTS=q8 or q4 (or their -f32act forms)
# loads both sides with those block weights: the package's matrices are
# MatMulNBits (int8 activations where splitdec takes them too).
#   scripts/bench_onnx_prompt.sh [WORK_DIR] [LAYERS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-/tmp/splitdec-bench-onnx-prompt}
layers=${2:-4}
rounds=${3:-3}
BIN=${BIN:-build/splitdec}
mkdir -p "$work"
[ -f "$work/model/config.json" ] || "$BIN" make-model --preset gemma3-1b --layers "$layers" --out "$work/model" >/dev/null
weights=(${WEIGHTS:+--weights "$WEIGHTS"})
"$BIN" export-onnx --model "$work/model" --out "$work/split" --plan split --max-length 1100 "${weights[@]}" >/dev/null
python3 -c "
import json, random
random.seed(7)
print(json.dumps({'tokens': [[2] + [random.randrange(1000, 200000) for _ in range(999)]]}))" > "$work/ids.json"
ort=$(node tests/onnx/time_prompt.mjs "$work/split" "$work/ids.json" --threads 2 --rounds $((rounds + 1)) |
      python3 -c "import json,sys; d=json.load(sys.stdin); print(min(d['inside_ms'][1:]))")
prefill() {
  "$BIN" generate --model "$work/model" --input "$work/ids.json" -n 1 -t 2 --json "${weights[@]}" 2>/dev/null |
    python3 -c "import json,sys; print(json.loads(sys.stdin.readline())['prefill_ms'])"
}
best=1e18; exact=1e18
for r in $(seq "$rounds"); do
  best=$(python3 -c "print(min($best, $(prefill)))")
  exact=$(python3 -c "print(min($exact, $(SPLITDEC_EXACT_GEMM=1 prefill)))")
done
python3 -c "print(f'prompt of 1000 tokens, $layers layers, weights ${WEIGHTS:-as made (bf16)}, 2 threads: ONNX Runtime {$ort:.0f} ms; splitdec {$best:.0f} ms ({$ort/$best:.2f}x), exact f32 {$exact:.0f} ms ({$ort/$exact:.2f}x)')"
