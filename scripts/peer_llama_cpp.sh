#!/usr/bin/env bash
# splitdec against llama.cpp on the same GGUF, the same prompt and thread
# count, alternated: prefill of a ~512-token prompt and greedy decode, per
# weight type. llama.cpp comes from npm's node-llama-cpp (its prebuilt Linux
# x64 CPU binaries, which scripts/setup.sh installs into tests/llama):
#   scripts/peer_llama_cpp.sh [BUILD_DIR] [LAYERS] [ROUNDS] [TYPES...]
# defaults: build 26 3 "bf16 q8 q4". The model is the gemma3-1b preset
# (random weights) cut to LAYERS layers, written by splitdec as a GGUF.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
layers="${2:-26}"
rounds="${3:-3}"
types=(bf16 q8 q4)
[ $# -gt 3 ] && types=("${@:4}")
bin="$build/splitdec"
threads=$(nproc)
[ -d "$root/tests/llama/node_modules/node-llama-cpp" ] || { echo "node-llama-cpp is not installed (see the header)" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$bin" make-model --preset gemma3-1b --layers "$layers" --dtype bf16 --out "$work/model" >/dev/null
# The same prompt ids on both sides: <bos>, then 511 ids spread over the vocabulary.
node -e 'const t = [2]; for (let i = 1; i < 512; ++i) t.push(1000 + (i * 7919) % 200000);
  process.stdout.write(JSON.stringify({tokens: [t]}))' > "$work/ids.json"
decode=64
cp "$root/scripts/peer_llama_cpp.mjs" "$root/tests/llama/peer_llama_cpp.mjs"  # resolves node-llama-cpp there
trap 'rm -rf "$work" "$root/tests/llama/peer_llama_cpp.mjs"' EXIT
echo "| weights | round | prompt tokens (splitdec / llama.cpp) | prefill tok/s splitdec | llama.cpp | ratio | decode tok/s splitdec | llama.cpp | ratio |"
echo "|---|---|---|---|---|---|---|---|---|"
for ty in "${types[@]}"; do
  "$bin" quantize --model "$work/model" --out "$work/$ty.gguf" --weights "$ty" >/dev/null
  for r in $(seq "$rounds"); do
    s=$("$bin" generate --model "$work/$ty.gguf" --input "$work/ids.json" -n "$decode" -t "$threads" --json 2>/dev/null | tail -1)
    l=$(node "$root/tests/llama/peer_llama_cpp.mjs" "$work/$ty.gguf" "$work/ids.json" "$decode" "$threads" 2>/dev/null | tail -1)
    node -e '
      const s = JSON.parse(process.argv[1]), l = JSON.parse(process.argv[2]);
      const sp = s.prompt_tokens / s.prefill_ms * 1e3, lp = l.prompt_tokens / l.prefill_ms * 1e3;
      const sd = s.decode_tokens / s.decode_ms * 1e3, ld = l.decode_tokens / l.decode_ms * 1e3;
      const f = (x) => x.toFixed(1);
      console.log(`| ${process.argv[3]} | ${process.argv[4]} | ${s.prompt_tokens} / ${l.prompt_tokens} | ${f(sp)} | ${f(lp)} | ${(sp / lp).toFixed(2)}x | ${f(sd)} | ${f(ld)} | ${(sd / ld).toFixed(2)}x |`);
    ' "$s" "$l" "$ty" "$r"
  done
done
