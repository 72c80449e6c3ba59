#!/usr/bin/python3
"""Writes tests/data/media/resize/: PIL's own resize output for test_pil_resize.

Run with Debian's /usr/bin/python3 (python3-pil 9.4; numpy is not needed).
Source images are deterministic (a fixed xorshift32 stream and fixed
patterns) and are stored next to the outputs, so the C++ test reads both:

  sources.bin   the source images, RGB bytes back to back
  resized.bin   PIL's Image.resize outputs, RGB bytes back to back
  manifest.json offsets and sizes of both, plus Gemma-4 target sizes computed
                with the processor's float64 formula (get_aspect_ratio_preserving_size)

Rerunning it rewrites the same bytes.
"""

import json
import math
import os
import sys

import PIL
from PIL import Image

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "media", "resize")
FILTERS = {"bilinear": Image.Resampling.BILINEAR, "bicubic": Image.Resampling.BICUBIC}
MAX_OUTPUT_PIXELS = 4000  # keeps the whole set well under 1 MB


class XorShift32:
    def __init__(self, seed):
        self.state = seed & 0xFFFFFFFF or 1

    def next(self):
        x = self.state
        x ^= (x << 13) & 0xFFFFFFFF
        x ^= x >> 17
        x ^= (x << 5) & 0xFFFFFFFF
        self.state = x
        return x

    def byte(self):
        return self.next() >> 24


def noise(width, height, seed):
    rng = XorShift32(seed)
    return bytes(rng.byte() for _ in range(width * height * 3))


def edges(width, height):
    """Hard 0/255 steps: blocks, one-pixel lines and a lone dot per channel,
    where bicubic's negative lobes overshoot and the clamp matters."""
    out = bytearray()
    for y in range(height):
        for x in range(width):
            r = 255 if ((x // 4) + (y // 3)) % 2 else 0
            g = 255 if x % 7 == 0 or y % 5 == 0 else 0
            b = 255 if (x == width // 2 and y == height // 2) or x >= width - 2 else 0
            out += bytes((r, g, b))
    return bytes(out)


def photo(width, height, seed):
    """Smooth gradients plus a little noise: closer to a real picture."""
    rng = XorShift32(seed)
    out = bytearray()
    for y in range(height):
        for x in range(width):
            r = (x * 255) // max(1, width - 1)
            g = (y * 255) // max(1, height - 1)
            b = int(127.5 + 127.5 * math.sin(x * 0.21 + y * 0.13))
            jitter = (rng.byte() % 17) - 8
            out += bytes(max(0, min(255, v + jitter)) for v in (r, g, b))
    return bytes(out)


def sources():
    return [
        ("one", 1, 1, noise(1, 1, 11)),
        ("tiny", 3, 2, noise(3, 2, 12)),
        ("column", 1, 23, noise(1, 23, 13)),
        ("row", 31, 1, noise(31, 1, 14)),
        ("odd", 13, 11, noise(13, 11, 15)),
        ("noise", 57, 41, noise(57, 41, 16)),
        ("edges", 64, 40, edges(64, 40)),
        ("photo", 70, 52, photo(70, 52, 17)),
        ("wide", 250, 9, noise(250, 9, 18)),
        ("big", 256, 144, photo(256, 144, 19)),
    ]


def targets(w, h):
    """Sizes down by large and small factors, up, one axis only, the same
    size, 1x1, and uneven mixtures."""
    t = [
        (1, 1),
        (w, h),
        (w, max(1, h // 2)),
        (w, h * 2 + 1),
        (max(1, w // 2), h),
        (w * 2 + 1, h),
        (max(1, w // 7), max(1, h // 9)),
        (max(1, w * 9 // 10), max(1, h * 8 // 10)),
        (max(1, w - 1), h + 1),
        (w * 2 + 1, h * 3),
        (int(w * 1.37) + 1, int(h * 1.61) + 1),
        (w * 2, max(1, h // 3)),
        (max(1, w // 3), h * 2),
        (5, 3),
        (1, 7),
        (7, 1),
        (17, 13),
    ]
    seen, kept = set(), []
    for size in t:
        if size in seen or size[0] * size[1] > MAX_OUTPUT_PIXELS:
            continue
        seen.add(size)
        kept.append(size)
    return kept


def gemma4_target_size(width, height, budget, patch=16, pool=3):
    """The processor's sizing rule (float64 like Python's), or None where it raises."""
    max_patches = budget * pool * pool
    target_px = max_patches * patch * patch
    factor = math.sqrt(target_px / (height * width))
    side = pool * patch
    th = int(math.floor(factor * height / side)) * side
    tw = int(math.floor(factor * width / side)) * side
    if th == 0 and tw == 0:
        return None
    max_side = (max_patches // (pool * pool)) * side
    if th == 0:
        th = side
        tw = min(int(math.floor(width / height)) * side, max_side)
    elif tw == 0:
        tw = side
        th = min(int(math.floor(height / width)) * side, max_side)
    if th * tw > target_px:
        return None
    return tw, th


def gemma4_cases():
    rng = XorShift32(99)
    sizes = [(896, 896), (1024, 1024), (1920, 1080), (1080, 1920), (1, 1), (1, 10000), (10000, 1), (47, 47),
             (48, 48), (49, 1), (3000, 2), (640, 480), (768, 768), (1056, 576), (333, 7777)]
    for _ in range(150):
        sizes.append((1 + rng.next() % 4000, 1 + rng.next() % 4000))
    for _ in range(30):
        sizes.append((1 + rng.next() % 40, 1 + rng.next() % 20000))
    out = []
    for w, h in sizes:
        for budget in (70, 140, 280, 560, 1120):
            size = gemma4_target_size(w, h, budget)
            out.append({"width": w, "height": h, "budget": budget,
                        "target": None if size is None else list(size)})
    return out


def main():
    os.makedirs(OUT_DIR, exist_ok=True)
    source_blob, resized_blob = bytearray(), bytearray()
    manifest = {"pil_version": PIL.__version__, "sources": [], "cases": [], "gemma4_sizes": gemma4_cases()}
    for name, w, h, pixels in sources():
        assert len(pixels) == w * h * 3
        manifest["sources"].append({"name": name, "width": w, "height": h, "offset": len(source_blob)})
        source_blob += pixels
        image = Image.frombytes("RGB", (w, h), pixels)
        for tw, th in targets(w, h):
            for filter_name, filter_id in FILTERS.items():
                # Image.resize's own defaults (reducing_gap=None), as HF calls it.
                resized = image.resize((tw, th), resample=filter_id)
                data = resized.tobytes()
                assert len(data) == tw * th * 3
                manifest["cases"].append({"source": name, "filter": filter_name, "width": tw, "height": th,
                                          "offset": len(resized_blob)})
                resized_blob += data
    with open(os.path.join(OUT_DIR, "sources.bin"), "wb") as f:
        f.write(source_blob)
    with open(os.path.join(OUT_DIR, "resized.bin"), "wb") as f:
        f.write(resized_blob)
    with open(os.path.join(OUT_DIR, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=None, separators=(",", ":"))
        f.write("\n")
    print(f"PIL {PIL.__version__}: {len(manifest['sources'])} sources ({len(source_blob)} B), "
          f"{len(manifest['cases'])} resizes ({len(resized_blob)} B), {len(manifest['gemma4_sizes'])} Gemma-4 sizes",
          file=sys.stderr)


if __name__ == "__main__":
    main()
