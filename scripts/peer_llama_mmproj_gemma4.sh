#!/usr/bin/env bash
# splitdec against llama.cpp's multimodal library (libmtmd) on a Gemma-4 text
# GGUF + mmproj pair (gemma4v, gemma4a; written by `splitdec quantize
# --out-mmproj`): the prompt's ids, the media rows after the projector, the
# greedy tokens and their log-probabilities.
#   scripts/peer_llama_mmproj_gemma4.sh LLAMA_CPP_SOURCE LLAMA_CPP_BUILD [BUILD_DIR]
# (as scripts/peer_llama_mmproj.sh: a llama.cpp checkout and its build with
# libmtmd; not in ctest, llama.cpp is not a test dependency.)
# What is compared, and why some rows cannot agree exactly:
#  - the image is 432 x 336 px (9 x 7 cells of 48 px: no resize on either
#    side; clip.cpp's 70-token floor lowered to its 63 tokens, splitdec at
#    --image-tokens 70, whose budget keeps it as it is);
#  - clip.cpp runs the vision FFN with gelu_quick for these files (no
#    clip.use_gelu key), Hugging Face and splitdec with tanh GELU: image rows
#    differ by that, not by layout (a wrong permutation or name gives ~100%);
#  - the audio tower has no such difference: its rows should agree to float
#    rounding;
#  - tiny-gemma4 in 4 layers (its 6-layer KV sharing is not llama.cpp's) with
#    a sliding window past the prompt (llama.cpp masks image tokens further
#    apart than the window; Hugging Face keeps a block whole).
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
image="$root/tests/data/media/pipeline/demo.png.gemma4_70.png"
# Half a second of a tone and noise, 16 kHz mono.
node -e 'const n = 8000, b = Buffer.alloc(44 + 2 * n); let s = 5;
  const rnd = () => ((s = (s * 1103515245 + 12345) % 2147483648) / 2147483648) * 0.4 - 0.2;
  b.write("RIFF", 0); b.writeUInt32LE(36 + 2 * n, 4); b.write("WAVEfmt ", 8); b.writeUInt32LE(16, 16);
  b.writeUInt16LE(1, 20); b.writeUInt16LE(1, 22); b.writeUInt32LE(16000, 24); b.writeUInt32LE(32000, 28);
  b.writeUInt16LE(2, 32); b.writeUInt16LE(16, 34); b.write("data", 36); b.writeUInt32LE(2 * n, 40);
  for (let i = 0; i < n; ++i) b.writeInt16LE(Math.round(Math.max(-1, Math.min(1, 0.3 * Math.sin(0.031 * i) + rnd())) * 32767), 44 + 2 * i);
  require("fs").writeFileSync(process.argv[1], b);' "$work/clip.wav"

"$bin" make-model --preset tiny-gemma4 --layers 4 --seed "${SEED:-3}" --out "$work/dense" >/dev/null
"$bin" make-model --preset tiny-gemma4-ple --seed "${SEED:-3}" --out "$work/ple" >/dev/null
for m in dense ple; do
  node -e 'const fs = require("fs"), p = process.argv[1], c = JSON.parse(fs.readFileSync(p));
    c.text_config.sliding_window = 512; fs.writeFileSync(p, JSON.stringify(c));' "$work/$m/config.json"
done
steps=8
echo "| model | mmproj | media | prompt ids equal | rows max abs diff (rel RMS) | greedy tokens equal | max log-prob diff |"
echo "|---|---|---|---|---|---|---|"
for m in dense ple; do
  for ty in ${TYPES:-f32 f16}; do
    "$bin" quantize --model "$work/$m" --out "$work/$m-$ty.gguf" --out-mmproj "$work/$m-$ty-mmproj.gguf" --weights "$ty" >/dev/null
    media_list="image"
    [ "$m" = ple ] && media_list="image audio"
    for media in $media_list; do
      file="$image"; flag="--image $image --image-tokens 70"; tag="<image:$image>"
      if [ "$media" = audio ]; then file="$work/clip.wav"; flag="--audio $work/clip.wav"; tag="<audio:$work/clip.wav>"; fi
      pair=(--model "$work/$m-$ty.gguf" --mmproj "$work/$m-$ty-mmproj.gguf")
      MTMD_IMAGE_MIN_TOKENS=63 "$work/driver" "$work/$m-$ty.gguf" "$work/$m-$ty-mmproj.gguf" "$file" "Look: <__media__> what is it?" \
        "$steps" 2>"$work/llama.log" >"$work/llama.json" || { cat "$work/llama.log" >&2; exit 1; }
      # shellcheck disable=SC2086
      "$bin" tokenize "${pair[@]}" -p "Look: $tag what is it?" --image-tokens 70 >"$work/ids.json"
      # shellcheck disable=SC2086
      "$bin" embed-media "${pair[@]}" $flag --out "$work/rows.npy" 2>/dev/null
      "$bin" generate "${pair[@]}" -p "Look: $tag what is it?" --image-tokens 70 -n "$steps" --step-logits "$work/steps.npy" -t 2 \
        >"$work/generate.txt" 2>&1
      node "$root/scripts/peer_mtmd_compare.mjs" "$work" "<|image|>,<|audio|>" "$m" "$ty" "$media"
    done
  done
done
