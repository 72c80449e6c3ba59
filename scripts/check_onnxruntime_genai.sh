#!/usr/bin/env bash
# Runs exported splitdec packages in ONNX Runtime GenAI itself and compares
# its greedy tokens and the logits each was chosen from (within 1e-4) with
# `splitdec generate` on the same exact inputs.
#
#   scripts/check_onnxruntime_genai.sh ORT_GENAI_DIR [BUILD_DIR]
#
# ORT_GENAI_DIR: an ONNX Runtime GenAI build or release package with
# include/ort_genai_c.h and lib/libonnxruntime-genai.so. GenAI loads ONNX
# Runtime (libonnxruntime.so) at run time, from LD_LIBRARY_PATH or its own
# lib/ folder; set ORT_LIB_DIR to a folder holding it if neither has it.
# BUILD_DIR: splitdec's build (default build/). Not part of CI (CI cannot
# fetch ONNX Runtime GenAI); see docs/onnx-export.md.
#
# For tiny-gemma3, tiny-gemma4 and tiny-gemma4-unified, both packages
# (split, single), five cases: text, one image, two turns with a new image
# in turn 2, three turns (text, image, text), and a text prompt after which
# tiny-gemma4 generates its image id (a generated media id is text). The driver
# (scripts/onnxruntime_genai_driver.cpp) binds media_embeds only, once, and
# feeds the last generated token before each later turn. Then GenAI's own
# multimodal route on tiny-gemma3-img256 (a PNG through its processor and
# vision.onnx; a text prompt), against splitdec on the same ids and PNG: the
# single package; with CONTRIB=1 (a GenAI built with contrib/onnxruntime-genai)
# the split package too.
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 ]]; then
  echo "usage: $0 ORT_GENAI_DIR [BUILD_DIR]" >&2
  exit 2
fi
. "$(dirname "$0")/genai_driver_setup.sh"
genai_driver_setup "$1" "${2:-}" splitdec-genai-check -O1

# compare WANT_JSON GOT_JSON: "same ..." when the driver's tokens and the
# logits it wrote ($work/got.npy) are splitdec's ($work/want.npy, within 1e-4).
compare() {
  python3 - "$1" "$2" "$work/want.npy" "$work/got.npy" <<'EOF' || echo "FAIL  comparison failed: $1"
import json, os, sys, struct, array
def npy(path):  # float32 [1, steps, vocab] -> (shape, values)
    b = open(path, 'rb').read()
    n = struct.unpack('<H', b[8:10])[0]
    header = b[10:10 + n].decode('latin1')
    shape = tuple(int(x) for x in header[header.index('(') + 1:header.index(')')].split(',') if x.strip())
    a = array.array('f'); a.frombytes(b[10 + n:])
    return shape, a
want = json.loads(sys.argv[1]).get("tokens")
if want is None:
    print("FAIL  splitdec: " + sys.argv[1]); sys.exit()
try:
    g = json.loads(sys.argv[2])
    got = [t for turn in g["turns"] for t in turn["tokens"]] if "turns" in g else g["tokens"]
except Exception:
    print("FAIL  " + sys.argv[2]); sys.exit()
if not os.path.exists(sys.argv[4]):
    print("FAIL  the driver wrote no logits"); sys.exit()
(ws, wl), (gs, gl) = npy(sys.argv[3]), npy(sys.argv[4])
if ws != gs:
    print("FAIL  logits %s, splitdec's %s" % (gs, ws)); sys.exit()
diff = max((abs(a - b) for a, b in zip(wl, gl)), default=0.0)
ok = got == want and diff <= 1e-4  # tokens alone missed a caller error that shifted logits by 0.1-0.4
print(("same  " if ok else "FAIL  ") + "%d tokens, logits within %.1e%s" %
      (len(want), diff, "" if got == want else ": %s  splitdec: %s" % (got, want)))
EOF
}

failures=0
for preset in tiny-gemma3 tiny-gemma4 tiny-gemma4-unified; do
  m=$work/$preset
  "$splitdec" make-model --preset "$preset" --out "$m" > /dev/null
  "$splitdec" embed-media --model "$m" --image "$root/data/demo.png" --out "$m/demo_png.npy" > /dev/null 2>&1
  # Inputs: token ids from the model's config.json, one image run as long as
  # its rows (the demo PNG through the model's frontend, and make-model's
  # demo_image.npy for the other image).
  python3 - "$m" <<'EOF'
import json, sys, os
m = sys.argv[1]
c = json.load(open(os.path.join(m, 'config.json')))
key = lambda name: c.get(name + '_id', c.get(name + '_index'))  # Gemma-3 configs say *_index
img, boi, eoi = key('image_token'), key('boi_token'), key('eoi_token')
def rows(npy):
    head = open(os.path.join(m, npy), 'rb').read(256).decode('latin1')
    return int(head[head.index("'shape': (") + 10:].split(',')[0])
def image(npy): return [boi] + [img] * rows(npy) + [eoi]
def turn(ids, media=None, n=8):
    t = {'tokens': [ids], 'modality': [['image' if x == img else 'text' for x in ids]], 'max_new_tokens': n}
    if media: t['media_embeddings'] = media
    return t
bos = c['bos_token_id']
cases = {
  'text': {'turns': [turn([bos, 40, 41, 42, 43, 44])]},
  'image': {'turns': [turn([bos, 40, 41] + image('demo_png.npy') + [50, 51, 52], 'demo_png.npy')]},
  'two_turns_new_image': {'turns': [turn([bos, 40, 41] + image('demo_image.npy') + [50, 51], 'demo_image.npy', 6),
                                    turn([60, 61] + image('demo_png.npy') + [62, 63], 'demo_png.npy')]},
  'three_turns': {'turns': [turn([bos, 40, 41, 42], None, 5), turn([60, 61] + image('demo_png.npy') + [62], 'demo_png.npy'),
                            turn([70, 71, 72], None, 4)]},
}
# Issue 32's reproduction: on tiny-gemma4 the 23rd generated token is the
# image id; generated ids are text in splitdec and must be in the package.
cases['generated_media_id'] = {'turns': [turn([2, 185, 505, 97, 222, 353, 44, 57, 440, 294, 68, 207, 318, 49, 485, 279],
                                               None, 33)]}
for name, case in cases.items():
    json.dump(case, open(os.path.join(m, name + '.json'), 'w'))
EOF
  for plan in split single; do
    pkg=$m/pkg-$plan
    "$splitdec" export-onnx --model "$m" --out "$pkg" --plan "$plan" --max-length 512 > /dev/null
    for case in text image two_turns_new_image three_turns generated_media_id; do
      want=$("$splitdec" generate --model "$m" --input "$m/$case.json" --plan split --json \
        --step-logits "$work/want.npy" | grep '^{' | head -1) || want='{"error": "splitdec generate failed"}'
      rm -f "$work/got.npy"
      if got=$("$work/driver" "$pkg" "$m/$case.json" "$work/got.npy" 2> "$work/err"); then :; else
        got="error: $(grep -v '^[[:space:]]*$' "$work/err" | tail -3 | tr '\n' ' ')"  # ORT's messages end in newlines
      fi
      verdict=$(compare "$want" "$got")
      printf '%-20s %-7s %-20s %s\n' "$preset" "$plan" "$case" "$verdict"
      [[ $verdict == same* ]] || failures=$((failures + 1))
    done
  done
done
# ONNX Runtime GenAI's own multimodal route (export-onnx --genai-route
# multimodal): the PNG through GenAI's processor (OgaLoadImage,
# OgaProcessorProcessImages) and vision.onnx. splitdec runs the ids GenAI's
# processor made, with its own rows of the same PNG; the ids must also be
# what splitdec's tokenizer makes of the text GenAI expanded.
preset=tiny-gemma3-img256
m=$work/$preset
"$splitdec" make-model --preset "$preset" --out "$m" > /dev/null
"$splitdec" embed-media --model "$m" --image "$root/data/demo.png" --out "$m/demo_png.npy" > /dev/null
plans=single
[[ ${CONTRIB:-0} == 1 ]] && plans="single split"  # split: needs GenAI with contrib/onnxruntime-genai
for plan in $plans; do
"$splitdec" export-onnx --model "$m" --out "$m/pkg-$plan" --plan "$plan" --genai-route multimodal --max-length 512 > /dev/null
for case in image text; do
  if [[ $case == image ]]; then prompt='<bos>Describe <start_of_image> in a word.' image=$root/data/demo.png
  else prompt='<bos>Say something.' image=-; fi
  rm -f "$work/got.npy"
  if got=$("$work/driver" --multimodal "$m/pkg-$plan" "$prompt" "$image" 10 "$work/got.npy" 2> "$work/err"); then
    python3 - "$m" "$got" "$prompt" <<'EOF'
import json, os, sys
m, got, prompt = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
c = json.load(open(os.path.join(m, 'config.json')))
img = c['image_token_index']
ids = got['input_ids']
n = sum(1 for t in ids if t == img)
case = {'tokens': [ids], 'modality': [['image' if t == img else 'text' for t in ids]], 'max_new_tokens': 10}
if n: case['media_embeddings'] = 'demo_png.npy'
json.dump(case, open(os.path.join(m, 'route.json'), 'w'))
# GenAI's Gemma-3 expansion of each image marker (gemma_image_processor.cpp)
expanded = prompt.replace('<start_of_image>', '\n\n<start_of_image>' + '<image_soft_token>' * 256 + '<end_of_image>\n\n')
json.dump([expanded], open(os.path.join(m, 'route_text.json'), 'w'))
EOF
    want=$("$splitdec" generate --model "$m" --input "$m/route.json" --plan split --json --max-new-tokens 10 --step-logits "$work/want.npy" |
      grep '^{' | head -1) || want='{"error": "splitdec generate failed"}'
    verdict=$(compare "$want" "$got")
    ours=$("$splitdec" tokenize --model "$m" --strings "$m/route_text.json" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0])' 2>&1) || true
    theirs=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["input_ids"])' "$got") || true
    [[ $ours == "$theirs" ]] || verdict="FAIL  GenAI's processor ids differ from splitdec's tokenizer: $theirs vs $ours"
    # The image prompt must reach the image: 256 image ids from GenAI's processor.
    images=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["input_ids"].count(int(sys.argv[2])))' "$got" \
      "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["image_token_index"])' "$m/config.json")") || images=?
    [[ $case == text || $images == 256 ]] || verdict="FAIL  $images image ids in GenAI's prompt, not 256"
  else
    verdict="FAIL  error: $(grep -v '^[[:space:]]*$' "$work/err" | tail -3 | tr '\n' ' ')"
  fi
  printf '%-20s %-7s %-20s %s\n' "$preset" "$plan" "route $case" "$verdict"
  [[ $verdict == same* ]] || failures=$((failures + 1))
done
done

if ((failures)); then
  echo "$failures case(s) differ from splitdec" >&2
  exit 1
fi
echo "ONNX Runtime GenAI gives splitdec's tokens and logits in every case"
