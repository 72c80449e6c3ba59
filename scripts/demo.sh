#!/usr/bin/env bash
# Sets up, builds, makes the built-in default model (tiny-gemma4, random
# weights) and answers a prompt that holds an image.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
model=out/tiny-gemma4
./build/splitdec make-model --preset tiny-gemma4 --out "$model" --seed 1
echo
echo "== prompt with an image ($model/demo_image.npy, 16 soft tokens, bidirectional on sliding layers)"
./build/splitdec generate --model "$model" \
  --prompt "<start_of_turn>user
What is in this picture? <image:$model/demo_image.npy><end_of_turn>
<start_of_turn>model
" --max-new-tokens 12
