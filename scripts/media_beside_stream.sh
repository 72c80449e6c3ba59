#!/usr/bin/env bash
# A stream's inter-token latency alone and beside one image request (issue
# 34: media encodes must not starve other streams' decode steps).
#   scripts/media_beside_stream.sh [BUILD_DIR] [MAX_TOKENS] [PRESET] [LAYERS]
# defaults: build 60 gemma3-12b 2 (SigLIP-So400m at 896 px, 4096 patches,
# beside a 2-layer cut of the 12B decoder; random bf16 weights).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
tokens="${2:-60}"
preset="${3:-gemma3-12b}"
layers="${4:-2}"
bin="$build/splitdec"
work="$(mktemp -d)"
trap 'kill $(cat "$work/pid" 2>/dev/null) 2>/dev/null || true; rm -rf "$work"' EXIT
"$bin" make-model --preset "$preset" --layers "$layers" --dtype bf16 --out "$work/model" >/dev/null
"$bin" serve --model "$work/model" --port 0 --max-sequences 4 --max-length 2048 > "$work/out" 2> "$work/err" &
echo $! > "$work/pid"
for _ in $(seq 600); do grep -q http:// "$work/out" 2>/dev/null && break; sleep 0.1; done
port="$(sed -n 's/.*http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$work/out" | head -1)"
[ -n "$port" ] || { cat "$work/err"; exit 1; }
node "$root/scripts/media_beside_stream.mjs" "http://127.0.0.1:$port" "$root/data/demo.png" 4 > /dev/null  # warm-up
node "$root/scripts/media_beside_stream.mjs" "http://127.0.0.1:$port" "$root/data/demo.png" "$tokens"
echo "peak RSS of serve: $(grep VmHWM /proc/$(cat "$work/pid")/status | awk '{print $2/1024 " MiB"}')"
