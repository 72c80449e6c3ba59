#!/usr/bin/env bash
# Prefix cache: time to first token of each turn of a five-turn streamed
# chat (each turn ~100 words, each reply up to MAX_TOKENS tokens), with
# `serve --prefix-cache on` and `off`, medians over CHATS chats.
#   scripts/bench_prefix_cache.sh [BUILD_DIR] [LAYERS] [CHATS] [MAX_TOKENS] [PLAN]
# defaults: build 4 3 32 split. The model is a gemma3-1b-shaped preset
# (random weights, bf16) cut to LAYERS layers to keep a run short.
# IMAGE=FILE: a chat about one picture: each chat's first message holds
# it, and each setting runs text-only chats and picture chats (the same
# words) back to back, so turn 5 of one compares with turn 5 of the other.
# It needs a preset with a vision tower: PRESET=gemma3-12b (the full
# SigLIP tower, 256 soft tokens; the decoder cut to LAYERS).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
layers="${2:-4}"
chats="${3:-3}"
tokens="${4:-32}"
plan="${5:-split}"
bin="$build/splitdec"
work="$(mktemp -d)"
trap 'kill $(cat "$work/pid" 2>/dev/null) 2>/dev/null || true; rm -rf "$work"' EXIT
"$bin" make-model --preset "${PRESET:-gemma3-1b}" --layers "$layers" --out "$work/model" >/dev/null
kinds=(text)
[ -n "${IMAGE:-}" ] && kinds=(text image)
echo "| prefix cache | chats | turn 1..5 TTFT p50 ms | prompt tokens per turn | cached tokens per turn | reply tokens per turn |"
echo "|---|---|---|---|---|---|"
for cache in off on; do
  "$bin" serve --model "$work/model" --port 0 --plan "$plan" --max-sequences 4 --max-length 2048 \
    --prefix-cache "$cache" > "$work/out" 2> "$work/err" &
  echo $! > "$work/pid"
  for _ in $(seq 600); do grep -q http:// "$work/out" 2>/dev/null && break; sleep 0.1; done
  port="$(sed -n 's/.*http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$work/out" | head -1)"
  [ -n "$port" ] || { cat "$work/err"; exit 1; }
  # A warm-up chat (first touch of the weights), not counted.
  node "$root/scripts/bench_prefix_cache.mjs" "http://127.0.0.1:$port" 1 1 4 Warm-up > /dev/null
  for kind in "${kinds[@]}"; do
    picture=""
    [ "$kind" = image ] && picture="$(cd "$(dirname "$IMAGE")" && pwd)/$(basename "$IMAGE")"
    node "$root/scripts/bench_prefix_cache.mjs" "http://127.0.0.1:$port" "$chats" 5 "$tokens" "Chat-$kind" $picture |
      node -e 'const r=JSON.parse(require("fs").readFileSync(0,"utf8"));
        const j=(xs)=>xs.join(" / ");
        console.log(`| ${process.argv[1]} | ${process.argv[2]} | ${j(r.ttft_ms_median_per_turn)} | ${j(r.prompt_tokens_per_turn)} | ${j(r.cached_tokens_per_turn)} | ${j(r.completion_tokens_per_turn)} |`)' "$cache" "$kind"
  done
  kill -TERM "$(cat "$work/pid")"; wait "$(cat "$work/pid")" || true
done
