#!/usr/bin/env bash
# splitdec against a native llama.cpp build on the same GGUF, the same
# prompt lengths and thread count, alternated round by round (issue 30's
# peer rows). llama.cpp's own tools measure its side: llama-bench for
# prefill and decode at a depth (flash attention off and on, its best kept),
# llama-batched-bench for N sequences decoding at once. Build them from any
# llama.cpp checkout (nothing of it is committed here):
#   cmake -S llama.cpp -B llama.cpp/build -DGGML_NATIVE=ON -DLLAMA_CURL=OFF
#   ninja -C llama.cpp/build llama-bench llama-batched-bench
#   scripts/peer_llama_bench.sh LLAMA_BIN_DIR [BUILD_DIR] [LAYERS] [ROUNDS] [TYPES...]
# defaults: build 26 2 "bf16 f16 q8 q4". The model is the gemma3-1b preset
# (PRESET=gemma3-12b for rows of whole K-quant super-blocks: 1b's 1152 are
# not) with random weights, cut to LAYERS layers, written by splitdec as a
# GGUF of each type; q4_k_m, q5_k_m, q6_k and q4_k_pure are written by
# llama.cpp's own llama-quantize from splitdec's bf16 GGUF (the _m mixes as
# downloaded: Q6_K embedding and some Q6_K matrices; pure: every matrix
# Q4_K, the embedding Q8_0), so that tool must be in LLAMA_BIN_DIR for them. SPLITDEC_SIMD=avx2 picks splitdec's AVX2 table; the llama.cpp
# side is whatever LLAMA_BIN_DIR was built for (say which in the results).
# Rows: prefill 512 (one sequence, one chunk of 512 on both sides), decode 64
# tokens at depth 512 and 4096, and 64 tokens for 4, 8 and 16 sequences of
# 512 (aggregate tokens/s); SHORT=1 keeps prefill 512 and decode @512. Peak
# RSS of each side's prefill-512 run. DEPTHS (default 4096) and BATCHES
# (default "4 8 16") choose the deeper decode rows and the sequence counts:
# DEPTHS="4096 16384" adds decode at 16K. PRESET=gemma4-e2b (with LAYERS 20 or
# more, so its KV-shared layers start after a full layer) measures Gemma-4's
# per-layer embeddings and KV sharing. KV=f16 (or bf16, q8) stores
# splitdec's KV cache that way (default f32; llama.cpp's default is f16).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
llama="${1:?usage: $0 LLAMA_BIN_DIR [BUILD_DIR] [LAYERS] [ROUNDS] [TYPES...]}"
build="${2:-$root/build}"
layers="${3:-26}"
rounds="${4:-2}"
types=(bf16 f16 q8 q4)
[ $# -gt 4 ] && types=("${@:5}")
bin="$build/splitdec"
threads=$(nproc)
for tool in llama-bench llama-batched-bench; do
  [ -x "$llama/$tool" ] || { echo "$llama/$tool not found (see the header)" >&2; exit 2; }
done
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$bin" make-model --preset "${PRESET:-gemma3-1b}" --layers "$layers" --dtype bf16 --out "$work/model" >/dev/null
# The same prompt ids as llama's tools feed: <bos>, then ids spread over the vocabulary.
ids() {  # ids LENGTH SEQUENCES > file
  node -e 'const [n, b] = process.argv.slice(1).map(Number), seqs = [];
    for (let s = 0; s < b; ++s) { const t = [2]; for (let i = 1; i < n; ++i) t.push(1000 + ((i + 31 * s) * 7919) % 200000); seqs.push(t); }
    process.stdout.write(JSON.stringify({tokens: seqs}))' "$1" "$2"
}
depths=(${DEPTHS-4096})
batches=(${BATCHES-4 8 16})
for shape in 512:1 "${depths[@]/%/:1}" "${batches[@]/#/512:}"; do ids "${shape%:*}" "${shape#*:}" > "$work/ids_${shape/:/_}.json"; done
decode=64

# splitdec: tokens/s of one field of generate's --json (prefill or decode, summed over sequences).
sd() {  # sd GGUF IDS_FILE FIELD [extra args]
  "$bin" generate --model "$1" --input "$2" -n "$decode" -t "$threads" --json ${KV:+--kv-dtype "$KV"} "${@:4}" 2>/dev/null | head -1 |
    node -e 'let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => {
      const r = JSON.parse(s), seqs = JSON.parse(require("fs").readFileSync(process.argv[1])).tokens.length;
      console.log(process.argv[2] === "prefill" ? (r.prompt_tokens * seqs) / r.prefill_ms * 1e3 : (r.decode_tokens * seqs) / r.decode_ms * 1e3);
    })' "$2" "$3"
}
# llama-bench: the best of flash attention off and on.
lb() {  # lb GGUF ARGS...
  "$llama/llama-bench" -m "$1" -t "$threads" -r 1 -fa 0,1 -o json "${@:2}" 2>/dev/null |
    node -e 'let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => console.log(Math.max(...JSON.parse(s).map((r) => r.avg_ts))))'
}
lbb() {  # lbb GGUF SEQUENCES: aggregate decode tokens/s
  "$llama/llama-batched-bench" -m "$1" -t "$threads" -c $(( $2 * (512 + decode + 16) )) -npp 512 -ntg "$decode" -npl "$2" \
    --output-format jsonl 2>&1 | grep '^{' | tail -1 | node -e 'let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => console.log(JSON.parse(s).speed_tg))'
}
rss() {  # rss COMMAND...: peak RSS in MiB
  /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -1 | awk '{printf "%.0f", $1 / 1024}'
}
row() {  # row TYPE ROUND NAME SPLITDEC LLAMA
  node -e 'const [t, r, n, s, l] = process.argv.slice(1);
    console.log(`| ${t} | ${r} | ${n} | ${(+s).toFixed(1)} | ${(+l).toFixed(1)} | ${(s / l).toFixed(2)}x |`)' "$@"
}
echo "| weights | round | row | splitdec tok/s | llama.cpp tok/s | ratio |"
echo "|---|---|---|---|---|---|"
for ty in "${types[@]}"; do
  g="$work/$ty.gguf"
  case "$ty" in
    q4_k_m | q4_k_pure | q5_k_m | q6_k)
      "$bin" quantize --model "$work/model" --out "$work/bf16-source.gguf" --weights bf16 >/dev/null
      pure=() type=$(echo "${ty%_pure}" | tr a-z A-Z)
      if [ "$ty" = q4_k_pure ]; then pure=(--pure --token-embedding-type q8_0 --output-tensor-type q8_0) type=Q4_K_M; fi
      "$llama/llama-quantize" "${pure[@]}" "$work/bf16-source.gguf" "$g" "$type" "$threads" >/dev/null 2>&1
      rm -f "$work/bf16-source.gguf" ;;
    *) "$bin" quantize --model "$work/model" --out "$g" --weights "$ty" >/dev/null ;;
  esac
  for r in $(seq "$rounds"); do
    row "$ty" "$r" "prefill 512" "$(sd "$g" "$work/ids_512_1.json" prefill --chunk 512)" "$(lb "$g" -p 512 -n 0)"
    row "$ty" "$r" "decode @512" "$(sd "$g" "$work/ids_512_1.json" decode)" "$(lb "$g" -p 0 -n "$decode" -d 512)"
    [ "${SHORT:-0}" = 1 ] && continue
    for d in "${depths[@]}"; do
      row "$ty" "$r" "decode @$d" "$(sd "$g" "$work/ids_${d}_1.json" decode)" "$(lb "$g" -p 0 -n "$decode" -d "$d")"
    done
    for b in "${batches[@]}"; do
      row "$ty" "$r" "$b sequences" "$(sd "$g" "$work/ids_512_$b.json" decode)" "$(lbb "$g" "$b")"
    done
  done
  echo "| $ty | | peak RSS MiB, prefill 512 | $(rss "$bin" generate --model "$g" --input "$work/ids_512_1.json" -n 1 -t "$threads" --chunk 512) | $(rss "$llama/llama-bench" -m "$g" -t "$threads" -r 1 -p 512 -n 0) | |"
done
