#!/usr/bin/env bash
# The seed's numbers in its own runtime: per-step generation time of the
# `split` package (GroupQueryAttention on shared past/present buffers)
# against the `single` package (Attention with a dense bias every step,
# separate past and present) inside ONNX Runtime GenAI, at 1K, 4K and 16K
# context, and the prompt time beside splitdec's on the same ids; gemma3-1b's
# shape with LAYERS layers (default 4), THREADS intra-op threads (default 2,
# written into each package's model.decoder.session_options: GenAI's own
# default here is one), the packages alternated. Peak RSS of each run beside it.
#
#   scripts/bench_onnxruntime_genai.sh ORT_GENAI_DIR [BUILD_DIR] [LAYERS] [CONTEXTS]
#
# ORT_GENAI_DIR as for scripts/check_onnxruntime_genai.sh (ORT_LIB_DIR too).
# The prompt goes in runs of 1024 ids, as a server feeds a long prompt, after
# one untimed run (ONNX Runtime's first run of a shape). Split buffers
# are sized for the context (max_length = context + 64), as a runtime sizes
# them. Not part of CI (it needs a GenAI build); about 10 minutes, 6 GB.
set -euo pipefail
if [[ $# -lt 1 || $# -gt 4 ]]; then
  echo "usage: $0 ORT_GENAI_DIR [BUILD_DIR] [LAYERS] [CONTEXTS]" >&2
  exit 2
fi
. "$(dirname "$0")/genai_driver_setup.sh"
genai_driver_setup "$1" "${2:-}" splitdec-genai-bench -O2
layers=${3:-4}
threads=${THREADS:-2}
contexts=${4:-1024 4096 16384}

steps=16
"$build/splitdec" make-model --preset gemma3-1b --layers "$layers" --out "$work/model" > /dev/null
max_context=$(tr ' ' '\n' <<< "$contexts" | sort -n | tail -1)
set_threads() {  # GenAI's session options for every graph of package $1
  python3 - "$1/genai_config.json" "$threads" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
c['model']['decoder']['session_options'] = {'intra_op_num_threads': int(sys.argv[2])}
json.dump(c, open(sys.argv[1], 'w'), indent=2)
EOF
}
"$build/splitdec" export-onnx --model "$work/model" --out "$work/single" --plan single --max-length $((max_context + 64)) > /dev/null
set_threads "$work/single"
# splitdec on the same ids (the driver's: <bos>, then 100 + (k * 7919) % 5000), best of 3.
splitdec_prompt() {
  python3 -c "import json; print(json.dumps({'tokens': [[2] + [100 + (k * 7919) % 5000 for k in range(1, $1)]]}))" > "$work/ids.json"
  for r in 1 2 3; do
    "$build/splitdec" generate --model "$work/model" --input "$work/ids.json" -n 1 -t "$threads" --json 2>/dev/null |
      python3 -c "import json,sys; print(json.loads(sys.stdin.readline())['prefill_ms'])"
  done | sort -n | head -1
}
printf '%-8s %-7s %12s %14s %12s\n' context package "prompt (ms)" "step p50 (ms)" "peak RSS"
for context in $contexts; do
  "$build/splitdec" export-onnx --model "$work/model" --out "$work/split" --plan split --max-length $((context + 64)) > /dev/null
  set_threads "$work/split"
  for pkg in single split; do
    /usr/bin/time -f '%M' -o "$work/rss" "$work/driver" --time "$work/$pkg" "$context" 1024 "$steps" > "$work/out" 2> "$work/err" ||
      { tail -3 "$work/err" >&2; exit 1; }
    python3 - "$context" "$pkg" "$(cat "$work/out")" "$(tail -1 "$work/rss")" <<'EOF'
import json, sys
context, pkg, out, rss = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
steps = sorted(out['step_ms'][2:])  # step 0 takes the prompt's logits, step 1 is the first token run's warm-up
print('%-8s %-7s %12.0f %14.1f %9.0f MiB' % (context, pkg, out['prompt_ms'], steps[len(steps) // 2], rss / 1024))
EOF
  done
  printf '%-8s %-7s %12.0f\n' "$context" splitdec "$(splitdec_prompt "$context")"
done
