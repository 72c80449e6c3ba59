#!/usr/bin/python3
# Writes the image and audio files test_media_files decodes, into
# tests/data/media/files/, together with what Hugging Face's pipeline sees in
# them: for each image the bytes of
#   ImageOps.exif_transpose(Image.open(f)).convert("RGB")
# (PIL 9.4, python3-pil) as <name>.rgb, and for each WAV the integer samples it
# holds. manifest.json lists both. Run with /usr/bin/python3 (the python on
# PATH may lack PIL); no numpy needed. The outputs are committed; rerunning
# this script regenerates them identically.
#
# PNGs are written by hand (below) so every colour type, bit depth, filter,
# interlacing and metadata chunk can be chosen; PIL only decodes them. JPEGs
# are written by PIL with the same libjpeg-turbo the C++ decoder links.
import io
import json
import os
import random
import struct
import warnings
import wave
import zlib

from PIL import Image, ImageOps

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "data", "media", "files")


# ---------------------------------------------------------------- pixels

def picture(w, h, seed):
    """RGB rows with gradients, hard edges and noise: JPEG and the PNG
    filters both get real work, and a wrong orientation cannot match."""
    rnd = random.Random(seed)
    rows = []
    for y in range(h):
        row = []
        for x in range(w):
            r = (x * 255) // max(1, w - 1)
            g = (y * 255) // max(1, h - 1)
            b = 255 if (x // 5 + y // 4) % 2 else 30
            if x < w // 3 and y < h // 3:  # a marked corner
                r, g, b = 250, 20, 20
            noise = rnd.randrange(-12, 13)
            row.append(tuple(max(0, min(255, v + noise)) for v in (r, g, b)))
        rows.append(row)
    return rows


def gray_of(rgb_rows):
    return [[(299 * r + 587 * g + 114 * b) // 1000 for r, g, b in row] for row in rgb_rows]


# ---------------------------------------------------------------- PNG writer

def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def filter_rows(lines, bpp):
    """Filters each scanline with type (row index % 5): all five PNG filters."""
    out = bytearray()
    prev = bytes(len(lines[0])) if lines else b""
    for i, line in enumerate(lines):
        kind = i % 5
        out.append(kind)
        for j, v in enumerate(line):
            a = line[j - bpp] if j >= bpp else 0
            b = prev[j]
            c = prev[j - bpp] if j >= bpp else 0
            pred = (0, a, b, (a + b) // 2, paeth(a, b, c))[kind]
            out.append((v - pred) & 0xFF)
        prev = line
    return bytes(out)


def pack_samples(samples, depth):
    """One scanline of samples (ints) at `depth` bits, big-endian, MSB first."""
    if depth == 16:
        return b"".join(struct.pack(">H", s) for s in samples)
    if depth == 8:
        return bytes(samples)
    out = bytearray()
    per_byte = 8 // depth
    for i in range(0, len(samples), per_byte):
        byte = 0
        group = samples[i:i + per_byte]
        for k, s in enumerate(group):
            byte |= s << (8 - depth * (k + 1))
        out.append(byte)
    return bytes(out)


ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]


def png_bytes(w, h, depth, color_type, pixels, interlace=False, before=b"", after=b"", idat_pieces=1):
    """pixels: h rows of w tuples of channel values (ints at `depth` bits)."""
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[color_type]
    bpp = max(1, channels * depth // 8)

    def lines_of(sub):
        return [pack_samples([v for px in row for v in px], depth) for row in sub]

    if not interlace:
        raw = filter_rows(lines_of(pixels), bpp)
    else:
        raw = b""
        for x0, y0, dx, dy in ADAM7:
            sub = [[pixels[y][x] for x in range(x0, w, dx)] for y in range(y0, h, dy)]
            if sub and sub[0]:
                raw += filter_rows(lines_of(sub), bpp)
    z = zlib.compress(raw, 9)
    cut = [len(z) * k // idat_pieces for k in range(idat_pieces + 1)]
    idats = b"".join(chunk(b"IDAT", z[cut[k]:cut[k + 1]]) for k in range(idat_pieces))
    ihdr = struct.pack(">IIBBBBB", w, h, depth, color_type, 0, 0, 1 if interlace else 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + before + idats + after + chunk(b"IEND", b"")


def tiff_with_orientation(orientation, big_endian=True):
    """A minimal TIFF (EXIF body): IFD0 with a couple of tags around Orientation."""
    e = ">" if big_endian else "<"
    head = (b"MM\x00\x2a" if big_endian else b"II\x2a\x00") + struct.pack(e + "I", 8)
    entries = [
        struct.pack(e + "HHI", 0x010F, 2, 4) + b"Cam\x00",               # Make, ASCII inline
        struct.pack(e + "HHIH", 0x0112, 3, 1, orientation) + b"\x00\x00",  # Orientation, SHORT
        struct.pack(e + "HHII", 0x0131, 2, 12, 8 + 2 + 3 * 12 + 4),     # Software, ASCII at offset
    ]
    return head + struct.pack(e + "H", len(entries)) + b"".join(entries) + struct.pack(e + "I", 0) + b"test-writer\x00"


def tiff_odd(kind):
    """Hostile or unusual EXIF bodies; PIL's reading of each is the truth."""
    if kind == "long6":  # Orientation stored as LONG
        return b"II\x2a\x00" + struct.pack("<IH", 8, 1) + struct.pack("<HHII", 0x0112, 4, 1, 6) + struct.pack("<I", 0)
    if kind == "two_shorts6":  # count 2: PIL takes the first value
        return b"MM\x00\x2a" + struct.pack(">IH", 8, 1) + struct.pack(">HHIHH", 0x0112, 3, 2, 6, 3) + struct.pack(">I", 0)
    if kind == "truncated_ifd8":  # 50 entries claimed, the 2nd is Orientation, the body ends in the 3rd
        body = b"MM\x00\x2a" + struct.pack(">IH", 8, 50) + struct.pack(">HHII", 0x010F, 2, 4, 0)
        return body + struct.pack(">HHIHH", 0x0112, 3, 1, 8, 0) + b"\x01\x31\x00"
    if kind == "ifd_out_of_bounds":
        return b"II\x2a\x00" + struct.pack("<I", 0xFFFFFF00) + bytes(20)
    if kind == "value_out_of_bounds":  # 4 SHORTs = 8 bytes, stored at an offset past the end
        return b"II\x2a\x00" + struct.pack("<IH", 8, 1) + struct.pack("<HHII", 0x0112, 3, 4, 4000) + struct.pack("<I", 0)
    if kind == "value_at_offset3":  # 4 SHORTs stored at an in-bounds offset, first is 3
        return b"MM\x00\x2a" + struct.pack(">IH", 8, 1) + struct.pack(">HHII", 0x0112, 3, 4, 26) + struct.pack(">I", 0) + struct.pack(">HHHH", 3, 1, 1, 1)
    if kind == "duplicate_last_wins4":
        return b"II\x2a\x00" + struct.pack("<IH", 8, 2) + struct.pack("<HHIHH", 0x0112, 3, 1, 6, 0) + struct.pack("<HHIHH", 0x0112, 3, 1, 4, 0) + struct.pack("<I", 0)
    if kind == "orientation9":  # out of range: no transpose
        return b"II\x2a\x00" + struct.pack("<IH", 8, 1) + struct.pack("<HHIHH", 0x0112, 3, 1, 9, 0) + struct.pack("<I", 0)
    raise ValueError(kind)


# ---------------------------------------------------------------- cases

def png_cases():
    cases = {}
    w, h = 37, 23
    rgb = picture(w, h, 1)
    gray = gray_of(rgb)
    cases["png_rgb8"] = png_bytes(w, h, 8, 2, rgb)
    cases["png_rgb8_multi_idat"] = png_bytes(w, h, 8, 2, rgb, idat_pieces=5)
    cases["png_gray8"] = png_bytes(w, h, 8, 0, [[(v,) for v in row] for row in gray])
    for depth in (1, 2, 4):
        levels = (1 << depth) - 1
        cases["png_gray%dbit" % depth] = png_bytes(w, h, depth, 0, [[(v * levels // 255,) for v in row] for row in gray])
    cases["png_gray_alpha8"] = png_bytes(w, h, 8, 4, [[(v, (x * 7) & 0xFF) for x, v in enumerate(row)] for row in gray])
    cases["png_rgba8"] = png_bytes(w, h, 8, 6, [[px + ((x * 11 + y) & 0xFF,) for x, px in enumerate(row)] for y, row in enumerate(rgb)])

    # 16 bits: PIL keeps the high byte of RGB/RGBA/LA, and clips gray ("I")
    # to 0..255 -- so the gray one spans both sides of 255.
    rnd = random.Random(7)
    rgb16 = [[tuple((v << 8) | rnd.randrange(256) for v in px) for px in row] for row in rgb]
    cases["png_rgb16"] = png_bytes(w, h, 16, 2, rgb16)
    cases["png_rgba16"] = png_bytes(w, h, 16, 6, [[px + (rnd.randrange(65536),) for px in row] for row in rgb16])
    cases["png_gray_alpha16"] = png_bytes(w, h, 16, 4, [[(v * 257, rnd.randrange(65536)) for v in row] for row in gray])
    gray16 = [[(v * 3 if y % 2 else v * 257 + x,) for x, v in enumerate(row)] for y, row in enumerate(gray)]
    cases["png_gray16"] = png_bytes(w, h, 16, 0, gray16)
    cases["png_gray16_interlaced"] = png_bytes(w, h, 16, 0, gray16, interlace=True)

    # Palettes: 8-bit with 200 colours, 4-bit with 12, 1-bit, tRNS, and
    # indices past the PLTE (PIL maps index i beyond it to gray (i, i, i)).
    palette = [(rnd.randrange(256), rnd.randrange(256), rnd.randrange(256)) for _ in range(200)]
    plte = chunk(b"PLTE", b"".join(bytes(c) for c in palette))
    idx = [[((x * 5 + y * 3) % 200,) for x in range(w)] for y in range(h)]
    cases["png_palette8"] = png_bytes(w, h, 8, 3, idx, before=plte)
    cases["png_palette8_trns"] = png_bytes(w, h, 8, 3, idx, before=plte + chunk(b"tRNS", bytes(range(0, 250, 3))))
    cases["png_palette8_trns_single"] = png_bytes(w, h, 8, 3, idx, before=plte + chunk(b"tRNS", b"\xff\xff\x00"))
    plte12 = chunk(b"PLTE", b"".join(bytes(c) for c in palette[:12]))
    idx4 = [[((x + y) % 12,) for x in range(w)] for y in range(h)]
    cases["png_palette4"] = png_bytes(w, h, 4, 3, idx4, before=plte12)
    cases["png_palette2_interlaced"] = png_bytes(w, h, 2, 3, [[((x * y) % 4,) for x in range(w)] for y in range(h)],
                                                 interlace=True, before=chunk(b"PLTE", b"\x00\x00\x00\xff\x00\x00\x00\xff\x00\x00\x00\xff"))
    cases["png_palette1"] = png_bytes(w, h, 1, 3, [[((x // 3 + y) % 2,) for x in range(w)] for y in range(h)],
                                      before=chunk(b"PLTE", b"\x10\x20\x30\xf0\xe0\xd0"))
    plte5 = chunk(b"PLTE", b"".join(bytes(c) for c in palette[:5]))
    cases["png_palette8_short_plte"] = png_bytes(w, h, 8, 3, [[((x * 9 + y * 17) % 256,) for x in range(w)] for y in range(h)], before=plte5)

    cases["png_rgb8_interlaced"] = png_bytes(w, h, 8, 2, rgb, interlace=True)
    cases["png_rgba8_interlaced_tiny"] = png_bytes(3, 2, 8, 6, [[(x * 80, y * 100, 7, 200) for x in range(3)] for y in range(2)], interlace=True)
    cases["png_rgb8_trns"] = png_bytes(w, h, 8, 2, rgb, before=chunk(b"tRNS", b"\x00\x10\x00\x20\x00\x30"))
    cases["png_gray8_trns"] = png_bytes(w, h, 8, 0, [[(v,) for v in row] for row in gray], before=chunk(b"tRNS", b"\x00\x40"))
    cases["png_gray8_1x1"] = png_bytes(1, 1, 8, 0, [[(77,)]])
    # Ancillary chunks PIL reads but does not apply to pixels.
    cases["png_rgb8_gamma_srgb_bkgd"] = png_bytes(w, h, 8, 2, rgb, before=chunk(b"gAMA", struct.pack(">I", 22727))
                                                  + chunk(b"sRGB", b"\x00") + chunk(b"bKGD", b"\x00\x01\x00\x02\x00\x03")
                                                  + chunk(b"sBIT", b"\x05\x06\x05"))

    # Orientation in a PNG: PIL 9.4's exif_transpose reads an eXIf chunk
    # (before or after IDAT), else "Raw profile type exif" text, else the XMP
    # packet's tiff:Orientation.
    w2, h2 = 29, 17
    small = picture(w2, h2, 3)
    cases["png_exif6"] = png_bytes(w2, h2, 8, 2, small, before=chunk(b"eXIf", tiff_with_orientation(6)))
    cases["png_exif3_after_idat"] = png_bytes(w2, h2, 8, 2, small, after=chunk(b"eXIf", tiff_with_orientation(3, big_endian=False)))
    hexed = tiff_with_orientation(8).hex()
    raw_profile = ("\nexif\n%8d\n" % (len(hexed) // 2) + "\n".join(hexed[i:i + 72] for i in range(0, len(hexed), 72)) + "\n").encode()
    cases["png_raw_profile_exif8"] = png_bytes(w2, h2, 8, 2, small, before=chunk(b"zTXt", b"Raw profile type exif\x00\x00" + zlib.compress(raw_profile)))
    xmp = b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF><rdf:Description tiff:Orientation="5"/></rdf:RDF></x:xmpmeta>'
    cases["png_xmp5"] = png_bytes(w2, h2, 8, 2, small, before=chunk(b"iTXt", b"XML:com.adobe.xmp\x00\x00\x00\x00\x00" + xmp))
    cases["png_xmp7_element"] = png_bytes(w2, h2, 8, 2, small, after=chunk(b"iTXt", b"XML:com.adobe.xmp\x00\x01\x00\x00\x00"
                                                                           + zlib.compress(b"<rdf:li><tiff:Orientation>7</tiff:Orientation>")))
    # EXIF wins over XMP when it holds an orientation.
    cases["png_exif2_over_xmp5"] = png_bytes(w2, h2, 8, 2, small, before=chunk(b"eXIf", tiff_with_orientation(2))
                                             + chunk(b"iTXt", b"XML:com.adobe.xmp\x00\x00\x00\x00\x00" + xmp))
    return cases


def jpeg_bytes(img, **kw):
    buf = io.BytesIO()
    img.save(buf, "JPEG", **kw)
    return buf.getvalue()


def jpeg_cases():
    cases = {}
    w, h = 45, 31  # odd sizes: partial MCUs and edge upsampling
    img = Image.new("RGB", (w, h))
    img.putdata([px for row in picture(w, h, 11) for px in row])
    cases["jpeg_420"] = jpeg_bytes(img, quality=90, subsampling=2)
    cases["jpeg_422"] = jpeg_bytes(img, quality=90, subsampling=1)
    cases["jpeg_444"] = jpeg_bytes(img, quality=95, subsampling=0)
    cases["jpeg_420_progressive"] = jpeg_bytes(img, quality=85, subsampling=2, progressive=True)
    cases["jpeg_444_progressive"] = jpeg_bytes(img, quality=85, subsampling=0, progressive=True)
    cases["jpeg_420_optimized_q40"] = jpeg_bytes(img, quality=40, subsampling=2, optimize=True)
    cases["jpeg_gray"] = jpeg_bytes(img.convert("L"), quality=90)
    cases["jpeg_gray_progressive"] = jpeg_bytes(img.convert("L"), quality=90, progressive=True)
    cmyk = Image.new("CMYK", (w, h))
    cmyk.putdata([(r, g, b, (x + y) * 3 % 256) for (r, g, b), x, y in
                  ((px, i % w, i // w) for i, px in enumerate(img.getdata()))])
    cases["jpeg_cmyk"] = jpeg_bytes(cmyk, quality=90)
    # EXIF orientations 1..8 on a non-square picture (big- and little-endian TIFF).
    w2, h2 = 40, 24
    img2 = Image.new("RGB", (w2, h2))
    img2.putdata([px for row in picture(w2, h2, 13) for px in row])
    for o in range(1, 9):
        body = tiff_with_orientation(o, big_endian=(o % 2 == 0))
        cases["jpeg_exif%d" % o] = jpeg_bytes(img2, quality=90, exif=b"Exif\x00\x00" + body)
    # PIL reads only the first Exif APP1.
    first = jpeg_bytes(img2, quality=90, exif=b"Exif\x00\x00" + tiff_with_orientation(6))
    second = b"\xff\xe1" + struct.pack(">H", 2 + 6 + len(tiff_with_orientation(3))) + b"Exif\x00\x00" + tiff_with_orientation(3)
    for kind in ("long6", "two_shorts6", "truncated_ifd8", "ifd_out_of_bounds", "value_out_of_bounds",
                 "value_at_offset3", "duplicate_last_wins4", "orientation9"):
        cases["jpeg_exif_" + kind] = jpeg_bytes(img2, quality=90, exif=b"Exif\x00\x00" + tiff_odd(kind))
    cases["jpeg_two_exif_first6"] = first[:2] + first[2:].replace(b"\xff\xdb", second + b"\xff\xdb", 1)
    return cases


def decoded_by_pil(data):
    im = Image.open(io.BytesIO(data))
    im = ImageOps.exif_transpose(im).convert("RGB")
    return im.size, im.tobytes()


# ---------------------------------------------------------------- audio

def wav_pcm(path, rate, channels, width, frames):
    """frames: list of per-channel int tuples."""
    with wave.open(path, "wb") as f:
        f.setnchannels(channels)
        f.setsampwidth(width)
        f.setframerate(rate)
        packed = bytearray()
        for fr in frames:
            for s in fr:
                packed += (s & ((1 << (8 * width)) - 1)).to_bytes(width, "little")
        f.writeframes(bytes(packed))


def wav_float(path, rate, frames):
    """IEEE float mono WAV (format 3), which the wave module cannot write."""
    data = b"".join(struct.pack("<f", s) for s in frames)
    fmt = struct.pack("<HHIIHH", 3, 1, rate, rate * 4, 4, 32)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data)) + data
    with open(path, "wb") as f:
        f.write(b"RIFF" + struct.pack("<I", len(body)) + body)


def audio_cases():
    rnd = random.Random(21)
    cases = []
    edge16 = [-32768, 32767, 0, 1, -1, 12345, -12345, 16384]
    mono16 = [(v,) for v in edge16 + [rnd.randrange(-32768, 32768) for _ in range(56)]]
    cases.append(("wav_mono16", 16000, 1, 16, mono16))
    stereo16 = [(rnd.randrange(-32768, 32768), rnd.randrange(-32768, 32768)) for _ in range(64)] + [(-32768, -32768), (32767, 32767), (1, 0)]
    cases.append(("wav_stereo16", 16000, 2, 16, stereo16))
    three16 = [(rnd.randrange(-32768, 32768), rnd.randrange(-32768, 32768), rnd.randrange(-32768, 32768)) for _ in range(40)]
    cases.append(("wav_3ch16", 16000, 3, 16, three16))
    mono24 = [(v,) for v in [-(1 << 23), (1 << 23) - 1, 0, 1, -1] + [rnd.randrange(-(1 << 23), 1 << 23) for _ in range(40)]]
    cases.append(("wav_mono24", 16000, 1, 24, mono24))
    mono32 = [(v,) for v in [-(1 << 31), (1 << 31) - 1, 0, 1, -1, 123456789] + [rnd.randrange(-(1 << 31), 1 << 31) for _ in range(40)]]
    cases.append(("wav_mono32", 16000, 1, 32, mono32))
    cases.append(("wav_mono16_44k", 44100, 1, 16, mono16))
    cases.append(("wav_empty16", 16000, 1, 16, []))
    written = []
    for name, rate, ch, bits, frames in cases:
        wav_pcm(os.path.join(OUT, name + ".wav"), rate, ch, bits // 8, frames)
        written.append({"file": name + ".wav", "sample_rate": rate, "channels": ch, "encoding": "pcm%d" % bits,
                        "samples": [s for fr in frames for s in fr]})
    floats = [0.0, 1.0, -1.0, 0.5, -0.25, 1.5, -2.0, 3.0517578125e-05] + [rnd.randrange(-4096, 4097) / 4096.0 for _ in range(32)]
    wav_float(os.path.join(OUT, "wav_float32.wav"), 16000, floats)
    written.append({"file": "wav_float32.wav", "sample_rate": 16000, "channels": 1, "encoding": "float32", "samples": floats})
    return written


def main():
    # PIL warns that palette tRNS bytes "should be converted to RGBA"; the
    # pipeline converts to RGB all the same, which is the point.
    warnings.simplefilter("ignore", UserWarning)
    os.makedirs(OUT, exist_ok=True)
    for old in os.listdir(OUT):
        os.remove(os.path.join(OUT, old))
    images = []
    for name, data in sorted({**png_cases(), **jpeg_cases()}.items()):
        ext = ".png" if data.startswith(b"\x89PNG") else ".jpg"
        with open(os.path.join(OUT, name + ext), "wb") as f:
            f.write(data)
        (width, height), rgb = decoded_by_pil(data)
        assert len(rgb) == width * height * 3
        with open(os.path.join(OUT, name + ".rgb"), "wb") as f:
            f.write(rgb)
        images.append({"name": name, "file": name + ext, "rgb": name + ".rgb", "width": width, "height": height})
    manifest = {
        "generator": "scripts/make_media_test_data.py (PIL %s)" % Image.__version__,
        "images": images,
        "audio": audio_cases(),
    }
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    print("wrote %d images and %d audio files to %s" % (len(images), len(manifest["audio"]), os.path.normpath(OUT)))


if __name__ == "__main__":
    main()
