#!/usr/bin/env bash
# Serving benchmark: aggregate generated tokens/s and p50/p99 time to first
# token and inter-token latency at several concurrent streaming clients,
# for plan `split` (continuous batching over the shared KV) and `single`
# (the seed's baseline: concat KV, dense bias) beside it.
#   scripts/bench_serve.sh [BUILD_DIR] [LAYERS] [MAX_TOKENS] [LEVELS...]
# defaults: build 4 32 "1 4 8 16". The model is a gemma3-1b-shaped preset
# (random weights, bf16) cut to LAYERS layers to keep a run to minutes.
# PLANS="split" runs only that plan; WEIGHTS=q8 (or any serve --weights)
# converts the weights at load; KV=f16 (or bf16, q8) stores the KV cache
# that way (default f32; llama.cpp's default is f16).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
layers="${2:-4}"
tokens="${3:-32}"
levels=(1 4 8 16)
[ $# -gt 3 ] && levels=("${@:4}")
bin="$build/splitdec"
work="$(mktemp -d)"
trap 'kill $(cat "$work/pid" 2>/dev/null) 2>/dev/null || true; rm -rf "$work"' EXIT
"$bin" make-model --preset gemma3-1b --layers "$layers" --out "$work/model" >/dev/null
echo "| plan | clients | requests | tokens | tokens/s | TTFT p50 ms | TTFT p99 ms | ITL p50 ms | ITL p99 ms |"
echo "|---|---|---|---|---|---|---|---|---|"
for plan in ${PLANS:-split single}; do
  "$bin" serve --model "$work/model" --port 0 --plan "$plan" --max-sequences 16 --max-length 512 \
    ${WEIGHTS:+--weights "$WEIGHTS"} ${KV:+--kv-dtype "$KV"} > "$work/out" 2> "$work/err" &
  echo $! > "$work/pid"
  for _ in $(seq 600); do grep -q http:// "$work/out" 2>/dev/null && break; sleep 0.1; done
  port="$(sed -n 's/.*http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$work/out" | head -1)"
  [ -n "$port" ] || { cat "$work/err"; exit 1; }
  # A warm-up request (first-touch of the weights), not counted.
  node "$root/tests/serve/bench_client.mjs" "http://127.0.0.1:$port" 1 1 4 > /dev/null
  for c in "${levels[@]}"; do
    per=$(( c == 1 ? 2 : 1 ))
    node "$root/tests/serve/bench_client.mjs" "http://127.0.0.1:$port" "$c" "$per" "$tokens" |
      node -e 'const r=JSON.parse(require("fs").readFileSync(0,"utf8"));
        console.log(`| ${process.argv[1]} | ${r.concurrency} | ${r.requests} | ${r.tokens} | ${r.tokens_per_s} | ${r.ttft_p50_ms} | ${r.ttft_p99_ms} | ${r.itl_p50_ms} | ${r.itl_p99_ms} |`)' "$plan"
  done
  kill -TERM "$(cat "$work/pid")"; wait "$(cat "$work/pid")" || true
done
