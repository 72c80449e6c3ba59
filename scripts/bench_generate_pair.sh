#!/usr/bin/env bash
# Whole-model generate, two splitdec binaries alternated on one machine
# (shared machines are noisy: compare within a run, as ratios).
#   scripts/bench_generate_pair.sh OLD_BINARY NEW_BINARY [ROUNDS]
# Makes a gemma3-1b-shaped model (4 layers, bf16, random weights) and a
# 512-token text prompt, then prints prefill and decode tokens/s and peak RSS
# of `generate --max-new-tokens 64` for each binary, ROUNDS times (default 3).
set -euo pipefail
old=$1 new=$2 rounds=${3:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$new" make-model --preset gemma3-1b --layers 4 --out "$work/model" >/dev/null
{
  printf '{"tokens": [[2'
  for i in $(seq 1 511); do printf ', %d' $((100 + (i * 37) % 5000)); done
  printf ']], "modality": [["text"'
  for i in $(seq 1 511); do printf ', "text"'; done
  printf ']]}\n'
} >"$work/in.json"
for r in $(seq 1 "$rounds"); do
  for bin in "$old" "$new"; do
    out=$(/usr/bin/time -f 'rss_kb %M' "$bin" generate --model "$work/model" --input "$work/in.json" --max-new-tokens 64 --json 2>&1)
    prefill=$(grep -o '"prefill_ms":[0-9.e+-]*' <<<"$out" | cut -d: -f2)
    decode=$(grep -o '"decode_ms":[0-9.e+-]*' <<<"$out" | cut -d: -f2)
    steps=$(grep -o '"decode_tokens":[0-9]*' <<<"$out" | cut -d: -f2)
    rss=$(grep -o 'rss_kb [0-9]*' <<<"$out" | cut -d' ' -f2)
    awk -v b="$bin" -v p="$prefill" -v d="$decode" -v s="$steps" -v m="$rss" -v r="$r" \
      'BEGIN { printf "round %d  %-40s prefill %7.1f tokens/s  decode %6.2f tokens/s  peak RSS %6.0f MiB\n", r, b, 512000 / p, s * 1000 / d, m / 1024 }'
  done
done
