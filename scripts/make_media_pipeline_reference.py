#!/usr/bin/python3
# Writes tests/data/media/pipeline/: the pixels Hugging Face's processors
# hand to the vision towers for data/demo.png and a JPEG of it, resized by
# PIL itself, so that tests/test_media_pipeline.cpp can rebuild the patches
# independently of splitdec's decoders, resizer and patch code.
#   demo.jpg                     data/demo.png saved as a baseline JPEG (quality 90)
#   <src>.siglip<S>.png          exif_transpose + convert("RGB") + resize((S, S), BILINEAR)
#   <src>.gemma4_<budget>.png    the same + resize(target, BICUBIC), target from
#                                get_aspect_ratio_preserving_size (patch 16, pool 3)
# Resized pixels are stored as PNG (lossless). Run with /usr/bin/python3 (PIL 9.4).
import json, math, os
from PIL import Image, ImageOps

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
out = os.path.join(root, "tests", "data", "media", "pipeline")
os.makedirs(out, exist_ok=True)

def load(path):
    return ImageOps.exif_transpose(Image.open(path)).convert("RGB")

def gemma4_size(w, h, budget, patch=16, pool=3):
    max_patches = budget * pool * pool
    f = math.sqrt(max_patches * patch * patch / (h * w))
    side = patch * pool
    th = math.floor(f * h / side) * side
    tw = math.floor(f * w / side) * side
    if th == 0 or tw == 0:
        raise SystemExit("degenerate size")
    return tw, th

Image.open(os.path.join(root, "data", "demo.png")).convert("RGB").save(
    os.path.join(out, "demo.jpg"), quality=90, subsampling=2)
manifest = []
for name, path in (("demo.png", os.path.join(root, "data", "demo.png")), ("demo.jpg", os.path.join(out, "demo.jpg"))):
    img = load(path)
    for s in (112,):
        f = f"{name}.siglip{s}.png"
        img.resize((s, s), Image.BILINEAR).save(os.path.join(out, f))
        manifest.append({"source": name, "kind": "siglip", "size": s, "file": f})
    for budget in (70,):
        tw, th = gemma4_size(img.width, img.height, budget)
        f = f"{name}.gemma4_{budget}.png"
        img.resize((tw, th), Image.BICUBIC).save(os.path.join(out, f))
        manifest.append({"source": name, "kind": "gemma4", "budget": budget, "width": tw, "height": th, "file": f})
with open(os.path.join(out, "manifest.json"), "w") as fh:
    json.dump(manifest, fh, indent=1)
