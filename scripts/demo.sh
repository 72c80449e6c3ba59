#!/usr/bin/env bash
# Sets up, builds, makes the built-in default model (tiny-gemma4, random
# weights, with a small Gemma-4 vision encoder), answers a question about
# data/demo.png (decoded, resized and encoded by the model's own frontend),
# then runs the same prompt behind a long context under every plan.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
model=out/tiny-gemma4
./build/splitdec make-model --preset tiny-gemma4 --out "$model" --seed 1
echo
echo "== a question about data/demo.png (160x120 PNG -> 432x336 at --image-tokens 70 -> 63 soft tokens,"
echo "   bidirectional on sliding layers; the weights are random, so the words are too)"
./build/splitdec generate --model "$model" --trace --verbose --chat \
  --system "Answer in one sentence." --image data/demo.png --image-tokens 70 \
  --prompt "What is in this picture?" --max-new-tokens 12

echo
echo "== the same question after ~1500 tokens of context, under each plan (all must give the same tokens;"
echo "   a tiny model on one thread: real-shape speed ratios are in docs/benchmarks.md, from 'splitdec bench')"
context=$(for i in $(seq 100); do printf 'the cat sat on the mat near the house. '; done)
for plan in single split-copy split unified; do
  ./build/splitdec generate --model "$model" --plan "$plan" --max-new-tokens 48 --threads 1 \
    --image-tokens 70 --prompt "$context <image:data/demo.png> What is in this picture?" 2>&1 |
    grep -E "^plan|tokens:" | sed "s/^\[0\] tokens:/  tokens:/"
done
