#!/usr/bin/env bash
# splitdec against llama.cpp's multimodal library (libmtmd) on the same
# Gemma-3 GGUF + mmproj pair (written by `splitdec quantize --out-mmproj`)
# and the same image: the prompt's ids, the image's rows after the
# projector, the greedy tokens and their log-probabilities.
#   scripts/peer_llama_mmproj.sh LLAMA_CPP_SOURCE LLAMA_CPP_BUILD [BUILD_DIR]
# LLAMA_CPP_BUILD holds bin/libllama.so, libmtmd.so ... (cmake -B B
# -DGGML_NATIVE=ON, then ninja -C B llama-mtmd-cli). node-llama-cpp ships the
# llama.cpp source it was built from as a git bundle:
#   git clone tests/llama/node_modules/node-llama-cpp/llama/gitRelease.bundle SRC
# (node-llama-cpp itself takes no images, so this is not in ctest.)
# With SPEED=ROUNDS it then times one 896 px image through the real
# Gemma-3 tower (the gemma3-12b preset's SigLIP-So400m, random weights, f16
# mmproj) on both sides, alternated, 2 threads: the tower and projector only
# (mtmd_encode_chunk against splitdec's encode_ms).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
src="$(cd "$1" && pwd)"
lib="$(cd "$2" && pwd)/bin"
build="${3:-$root/build}"
bin="$build/splitdec"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
g++ -O2 -std=c++17 "$root/scripts/llama_mtmd_driver.cpp" -I"$src/include" -I"$src/ggml/include" -I"$src/tools/mtmd" \
  -L"$lib" -lmtmd -lllama -lggml -lggml-base -Wl,-rpath,"$lib" -o "$work/driver"

# Two layers (llama.cpp's Gemma-3 makes every 6th layer full: both are
# sliding there as in splitdec), and a sliding window past the prompt:
# llama.cpp masks image tokens further apart than the window, Hugging Face
# (and splitdec) keep an image block whole; real Gemma-3 windows (1024) are
# wider than an image (256 tokens), the tiny preset's (8) is not.
"$bin" make-model --preset tiny-gemma3 --layers 2 --seed "${SEED:-3}" --out "$work/model" >/dev/null
node -e 'const fs = require("fs"), p = process.argv[1], c = JSON.parse(fs.readFileSync(p));
  c.text_config.sliding_window = 512; fs.writeFileSync(p, JSON.stringify(c));' "$work/model/config.json"
steps=8
echo "| mmproj | image | prompt ids equal | image rows max abs diff (rel RMS) | greedy tokens equal | max log-prob diff |"
echo "|---|---|---|---|---|---|"
for ty in ${TYPES:-f32 f16}; do  # TYPES=q8: a Q8_0 tower
  "$bin" quantize --model "$work/model" --out "$work/text-$ty.gguf" --out-mmproj "$work/mmproj-$ty.gguf" --weights "$ty" >/dev/null
  for image in "$root/tests/data/media/pipeline/demo.png.siglip112.png" "$root/tests/data/media/pipeline/demo.jpg.siglip112.png" \
    "$root/data/demo.png"; do
    pair=(--model "$work/text-$ty.gguf" --mmproj "$work/mmproj-$ty.gguf")
    "$work/driver" "$work/text-$ty.gguf" "$work/mmproj-$ty.gguf" "$image" "Look: <__media__> what is it?" "$steps" \
      2>"$work/llama.log" >"$work/llama.json" || { cat "$work/llama.log" >&2; exit 1; }
    "$bin" tokenize "${pair[@]}" -p "Look: <image:$image> what is it?" >"$work/ids.json"
    "$bin" embed-media "${pair[@]}" --image "$image" --out "$work/rows.npy" 2>/dev/null
    "$bin" generate "${pair[@]}" -p "Look: <image:$image> what is it?" -n "$steps" --step-logits "$work/steps.npy" -t 2 \
      >"$work/generate.txt" 2>&1
    node "$root/scripts/peer_mtmd_compare.mjs" "$work" "<image_soft_token>" "$ty" "$(basename "$image")"
  done
done

[ -n "${SPEED:-}" ] || exit 0
"$bin" make-model --preset gemma3-12b --layers 1 --dtype bf16 --out "$work/big" >/dev/null
"$bin" quantize --model "$work/big" --out "$work/big.gguf" --out-mmproj "$work/big-mmproj.gguf" --weights f16 >/dev/null
echo
echo "| round | 896 px image encode, splitdec ms | llama.cpp ms | splitdec / llama.cpp speed |"
echo "|---|---|---|---|"
for r in $(seq "$SPEED"); do
  l=$("$work/driver" "$work/big.gguf" "$work/big-mmproj.gguf" "$root/data/demo.png" "<__media__>" 0 2>/dev/null |
    node -e 'let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => console.log(JSON.parse(s).encode_ms))')
  s=$("$bin" generate --model "$work/big.gguf" --mmproj "$work/big-mmproj.gguf" -p "<image:$root/data/demo.png>" -n 1 -t 2 --json \
    2>/dev/null | tail -1 | node -e 'let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => console.log(JSON.parse(s).encode_ms))')
  node -e 'const [r, s, l] = process.argv.slice(1); console.log(`| ${r} | ${(+s).toFixed(0)} | ${(+l).toFixed(0)} | ${(l / s).toFixed(2)}x |`)' "$r" "$s" "$l"
done
