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
# For tiny-gemma3, tiny-gemma4, tiny-gemma4-unified and tiny-gemma4-ple
# (per-layer embeddings, as E2B / E4B), both packages (split, single), five
# cases: text, one image, two turns with a new image in turn 2, three turns
# (text, image, text), and a text prompt after which tiny-gemma4 generates
# its image id (a generated media id is text); and an audio prompt for the
# presets with an audio frontend (unified, ple). The driver
# (scripts/onnxruntime_genai_driver.cpp) binds media_embeds only, once, and
# feeds the last generated token before each later turn. Then GenAI's own
# multimodal route on tiny-gemma3-img256, tiny-gemma4 and tiny-gemma4-ple (a PNG through its
# processor and vision.onnx; a text prompt), against splitdec on the same
# ids and PNG: the single package; with CONTRIB=1 (a GenAI built with
# contrib/onnxruntime-genai) the split package too. For Gemma-4 the image is
# a 768 x 768 PNG, which both processors keep at its size; the demo PNG is
# resized, by GenAI with torchvision's float bicubic and by splitdec with
# PIL's uint8 bicubic (Hugging Face's fast and slow processors), so that
# case requires the same ids and tokens and reports the logits' distance.
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 ]]; then
  echo "usage: $0 ORT_GENAI_DIR [BUILD_DIR]" >&2
  exit 2
fi
. "$(dirname "$0")/genai_driver_setup.sh"
genai_driver_setup "$1" "${2:-}" splitdec-genai-check -O1

# compare WANT_JSON GOT_JSON [TOLERANCE]: "same ..." when the driver's tokens
# and the logits it wrote ($work/got.npy) are splitdec's ($work/want.npy,
# within TOLERANCE, default 1e-4).
compare() {
  python3 - "$1" "$2" "$work/want.npy" "$work/got.npy" "${3:-1e-4}" <<'EOF' || echo "FAIL  comparison failed: $1"
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
ok = got == want and diff <= float(sys.argv[5])  # tokens alone missed a caller error that shifted logits by 0.1-0.4
print(("same  " if ok else "FAIL  ") + "%d tokens, logits within %.1e%s" %
      (len(want), diff, "" if got == want else ": %s  splitdec: %s" % (got, want)))
EOF
}

# One second of 16 kHz mono audio (stdlib only): a tone and its octave.
python3 - "$work/tone.wav" <<'EOF'
import math, struct, sys, wave
with wave.open(sys.argv[1], 'wb') as w:
    w.setnchannels(1), w.setsampwidth(2), w.setframerate(16000)
    w.writeframes(b''.join(struct.pack('<h', int(9000 * math.sin(2 * math.pi * 440 * t / 16000) +
                                                  4000 * math.sin(2 * math.pi * 880 * t / 16000))) for t in range(16000)))
EOF

failures=0
for preset in tiny-gemma3 tiny-gemma4 tiny-gemma4-unified tiny-gemma4-ple; do
  m=$work/$preset
  "$splitdec" make-model --preset "$preset" --out "$m" > /dev/null
  "$splitdec" embed-media --model "$m" --image "$root/data/demo.png" --out "$m/demo_png.npy" > /dev/null 2>&1
  # The audio turn, for checkpoints with an audio frontend (gemma4_unified's
  # frames, E2B / E4B's conformer): config.json's audio_config says so, and
  # then its rows must come.
  if grep -q '"audio_config"' "$m/config.json"; then
    "$splitdec" embed-media --model "$m" --audio "$work/tone.wav" --out "$m/tone_wav.npy" > /dev/null 2>&1 ||
      { echo "FAIL  $preset: embed-media --audio failed"; failures=$((failures + 1)); }
  fi
  # Inputs: token ids from the model's config.json, one image run as long as
  # its rows (the demo PNG through the model's frontend, and make-model's
  # demo_image.npy for the other image), one audio run likewise.
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
if os.path.exists(os.path.join(m, 'tone_wav.npy')):
    aud, boa, eoa = key('audio_token'), key('boa_token'), key('eoa_token')
    audio = [boa] + [aud] * rows('tone_wav.npy') + [eoa]
    cases['audio'] = {'turns': [{'tokens': [[bos, 40, 41] + audio + [50, 51]],
                                 'modality': [['audio' if x == aud else 'text' for x in [bos, 40, 41] + audio + [50, 51]]],
                                 'media_embeddings': 'tone_wav.npy', 'max_new_tokens': 8}]}
for name, case in cases.items():
    json.dump(case, open(os.path.join(m, name + '.json'), 'w'))
EOF
  cases="text image two_turns_new_image three_turns generated_media_id"
  [[ -e $m/audio.json ]] && cases="$cases audio"
  for plan in split single; do
    pkg=$m/pkg-$plan
    "$splitdec" export-onnx --model "$m" --out "$pkg" --plan "$plan" --max-length 512 > /dev/null
    for case in $cases; do
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
#
# A 768 x 768 RGB PNG (stdlib only): Gemma-4's processors keep it at its
# size at the default budget of 280 soft tokens (16 x 16 pooled bins).
python3 - "$work/square768.png" <<'EOF'
import math, struct, sys, zlib
W = H = 768
raw = b''.join(b'\0' + bytes(v for x in range(W) for v in ((x * 255) // (W - 1), (y * 255) // (H - 1),
                                                           int(127 + 120 * math.sin((x + 2 * y) / 23.0))))
               for y in range(H))
chunk = lambda t, d: struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d) & 0xffffffff)
open(sys.argv[1], 'wb').write(b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', W, H, 8, 2, 0, 0, 0)) +
                              chunk(b'IDAT', zlib.compress(raw, 9)) + chunk(b'IEND', b''))
EOF
plans=single
[[ ${CONTRIB:-0} == 1 ]] && plans="single split"  # split: needs GenAI with contrib/onnxruntime-genai
for preset in tiny-gemma3-img256 tiny-gemma4 tiny-gemma4-ple; do
m=$work/$preset
"$splitdec" make-model --preset "$preset" --out "$m" > /dev/null
if [[ $preset == tiny-gemma3-img256 ]]; then
  marker='<start_of_image>' cases="image text"
else
  marker='<|image>' cases="image image_resized text"
fi
for plan in $plans; do
"$splitdec" export-onnx --model "$m" --out "$m/pkg-$plan" --plan "$plan" --genai-route multimodal --max-length 1024 > /dev/null
for case in $cases; do
  tolerance=1e-4 image=-
  case $case in
    image) image=$root/data/demo.png; [[ $preset == tiny-gemma4* ]] && image=$work/square768.png ;;
    image_resized) image=$root/data/demo.png tolerance=1 ;;
  esac
  if [[ $case == text ]]; then prompt='<bos>Say something.'; else prompt="<bos>Describe $marker in a word."; fi
  [[ $image == - ]] || "$splitdec" embed-media --model "$m" --image "$image" --out "$m/rows.npy" > /dev/null 2>&1
  rm -f "$work/got.npy"
  if got=$("$work/driver" --multimodal "$m/pkg-$plan" "$prompt" "$image" 10 "$work/got.npy" 2> "$work/err"); then
    # The ids GenAI's processor made; the text it expanded (each image marker
    # as gemma_image_processor.cpp / gemma4_multimodal_processor.cpp write it).
    python3 - "$m" "$got" "$prompt" <<'EOF'
import json, os, sys
m, got, prompt = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
c = json.load(open(os.path.join(m, 'config.json')))
img = c.get('image_token_id', c.get('image_token_index'))
ids = got['input_ids']
n = sum(1 for t in ids if t == img)
case = {'tokens': [ids], 'modality': [['image' if t == img else 'text' for t in ids]], 'max_new_tokens': 10}
if n: case['media_embeddings'] = 'rows.npy'
json.dump(case, open(os.path.join(m, 'route.json'), 'w'))
if c.get('model_type') == 'gemma4':
    expanded = prompt.replace('<|image>', '\n\n<|image>' + '<|image|>' * n + '<image|>\n\n')
else:
    expanded = prompt.replace('<start_of_image>', '\n\n<start_of_image>' + '<image_soft_token>' * 256 + '<end_of_image>\n\n')
json.dump([expanded], open(os.path.join(m, 'route_text.json'), 'w'))
json.dump({'image_ids': n}, open(os.path.join(m, 'route_count.json'), 'w'))
EOF
    want=$("$splitdec" generate --model "$m" --input "$m/route.json" --plan split --json --max-new-tokens 10 --step-logits "$work/want.npy" |
      grep '^{' | head -1) || want='{"error": "splitdec generate failed"}'
    verdict=$(compare "$want" "$got" "$tolerance")
    ours=$("$splitdec" tokenize --model "$m" --strings "$m/route_text.json" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0])' 2>&1) || true
    theirs=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["input_ids"])' "$got") || true
    [[ $ours == "$theirs" ]] || verdict="FAIL  GenAI's processor ids differ from splitdec's tokenizer: $theirs vs $ours"
    # The image prompt must reach the image: as many image ids as splitdec's frontend makes rows.
    images=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["image_ids"])' "$m/route_count.json") || images=?
    rows=0
    [[ $image == - ]] || rows=$(python3 -c 'import sys; h = open(sys.argv[1], "rb").read(256).decode("latin1"); print(int(h[h.index("(") + 1:].split(",")[0]))' "$m/rows.npy")
    [[ $images == "$rows" ]] || verdict="FAIL  $images image ids in GenAI's prompt, splitdec's frontend makes $rows rows"
  else
    verdict="FAIL  error: $(grep -v '^[[:space:]]*$' "$work/err" | tail -3 | tr '\n' ' ')"
  fi
  printf '%-20s %-7s %-20s %s\n' "$preset" "$plan" "route $case" "$verdict"
  [[ $verdict == same* ]] || failures=$((failures + 1))
done
done
done

if ((failures)); then
  echo "$failures case(s) differ from splitdec" >&2
  exit 1
fi
echo "ONNX Runtime GenAI gives splitdec's tokens and logits in every case"
