#include "media/image_file.h"

#include <algorithm>
#include <cerrno>
#include <csetjmp>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <jpeglib.h>  // after <cstdio>: it needs FILE and size_t declared
#include <jerror.h>   // the warning codes
#include <png.h>

#include "core/error.h"

// What HF's processors see is PIL 9.4's
//   ImageOps.exif_transpose(Image.open(f)).convert("RGB")
// and these are the PIL facts followed here (read from its sources, checked
// against it by tests/test_media_files.cpp):
//  * PNG: 16-bit RGB / RGBA / gray+alpha keep the high byte of each sample;
//    16-bit gray opens as mode "I" and convert("RGB") clips it to 0..255;
//    1/2/4-bit gray is scaled to 0..255; palette index i past the PLTE
//    entries maps to (i, i, i), PIL's initial palette ramp; alpha and tRNS
//    are dropped, never composited; gAMA/sRGB/iCCP/bKGD/sBIT are ignored.
//  * JPEG: libjpeg's defaults (islow DCT, fancy upsampling), output RGB for 3
//    components, gray for 1; 4 components are read as CMYK, inverted (PIL
//    assumes Adobe polarity, "CMYK;I") and converted with PIL's cmyk2rgb.
//  * Orientation: JPEG: the first APP1 "Exif\0" segment. PNG: the eXIf chunk
//    (before or after IDAT), else a "Raw profile type exif" text chunk; when
//    neither holds tag 0x0112, the XMP packet's tiff:Orientation.
//
// libpng and libjpeg report errors by longjmp. Every call into them happens
// inside a small phase function that sets the jump target and holds only
// plain pointers, so no C++ object with a destructor is ever jumped over; the
// C++ work (allocation, conversion, exceptions) happens between phases.

namespace splitdec {

namespace {

// Bigger files are not pictures a frontend should read into memory.
constexpr size_t kMaxImageFileBytes = size_t(1) << 30;
// Deflate cannot expand data by more than 1032:1, so a PNG whose pixel rows
// need more than this many bytes per file byte is truncated or corrupt:
// refused before its pixel buffer is allocated.
constexpr uint64_t kMaxDeflateRatio = 1100;
// The most libpng may allocate for one chunk's decompressed text (PIL
// itself refuses text chunks that inflate past 1 MB).
constexpr size_t kMaxPngChunkBytes = size_t(8) << 20;

// A progressive JPEG may legally hold thousands of scans, each a pass over
// every block: a small file that costs minutes. Encoders write about ten;
// libjpeg-turbo's guidance for untrusted input is a limit like this one.
constexpr int kMaxJpegScans = 500;

constexpr uint8_t kPngSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

bool starts_with(const uint8_t* data, size_t size, const char* magic, size_t n) {
  return size >= n && std::memcmp(data, magic, n) == 0;
}

bool is_png(const uint8_t* data, size_t size) { return size >= 8 && std::memcmp(data, kPngSignature, 8) == 0; }
bool is_jpeg(const uint8_t* data, size_t size) {
  return size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF;
}

// Zero sizes and the pixel limit, from the header, before any allocation.
void check_size(const std::string& name, const char* format, uint64_t width, uint64_t height, int64_t max_pixels) {
  const std::string dims = std::to_string(width) + " x " + std::to_string(height);
  if (width == 0 || height == 0)
    throw FormatError(name + ": the " + format + " header gives a zero-size image (" + dims + " pixels)");
  if (width * height > uint64_t(max_pixels))
    throw InputError(name + ": the " + format + " image is " + dims + " = " + std::to_string(width * height) +
                     " pixels, more than the limit of " + std::to_string(max_pixels) +
                     (max_pixels == kMaxImagePixels ? " (kMaxImagePixels)" : ""));
}

// ---------------------------------------------------------------- EXIF

uint32_t read_u16(const uint8_t* p, bool big) { return big ? uint32_t(p[0]) << 8 | p[1] : uint32_t(p[1]) << 8 | p[0]; }
uint32_t read_u32(const uint8_t* p, bool big) {
  return big ? uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]
             : uint32_t(p[3]) << 24 | uint32_t(p[2]) << 16 | uint32_t(p[1]) << 8 | p[0];
}

// The Orientation tag (0x0112) of IFD0 in a TIFF body (EXIF without its
// "Exif\0\0" prefix), read as PIL does: nullopt when the tag is absent or the
// body is unreadable; otherwise the tag's first value, or 0 when its type is
// not an integer (present, but no orientation PIL would apply). Every offset
// is checked against `size`; entries past the end end the walk, keeping what
// was read, and a value stored out of bounds skips that entry -- both as
// PIL's TIFF directory reader does.
std::optional<int64_t> tiff_orientation(const uint8_t* tiff, size_t size) {
  if (size < 8) return std::nullopt;
  bool big;
  if (std::memcmp(tiff, "MM\0*", 4) == 0 || std::memcmp(tiff, "MM*\0", 4) == 0)
    big = true;
  else if (std::memcmp(tiff, "II*\0", 4) == 0 || std::memcmp(tiff, "II\0*", 4) == 0)
    big = false;
  else
    return std::nullopt;  // not TIFF, or BigTIFF (which EXIF never is)
  const uint64_t ifd = read_u32(tiff + 4, big);
  if (ifd + 2 > size) return std::nullopt;
  const uint32_t count = read_u16(tiff + ifd, big);
  std::optional<int64_t> orientation;
  for (uint32_t i = 0; i < count; ++i) {
    const uint64_t entry = ifd + 2 + uint64_t(i) * 12;
    if (entry + 12 > size) break;
    const uint8_t* e = tiff + entry;
    const uint32_t tag = read_u16(e, big), type = read_u16(e + 2, big), n = read_u32(e + 4, big);
    // Unit sizes of the TIFF types PIL knows; others it skips.
    static constexpr uint8_t kUnit[17] = {0, 1, 1, 2, 4, 8, 1, 1, 2, 4, 8, 4, 8, 4, 0, 0, 8};
    if (type >= 17 || kUnit[type] == 0) continue;
    if (tag != 0x0112 || n == 0) continue;
    const uint64_t bytes = uint64_t(n) * kUnit[type];
    const uint8_t* value = e + 8;
    if (bytes > 4) {
      const uint64_t at = read_u32(e + 8, big);
      if (at + bytes > size) continue;
      value = tiff + at;
    }
    switch (type) {
      case 3: orientation = read_u16(value, big); break;                  // SHORT
      case 8: orientation = int16_t(read_u16(value, big)); break;         // SSHORT
      case 4: orientation = read_u32(value, big); break;                  // LONG
      case 9: orientation = int32_t(read_u32(value, big)); break;         // SLONG
      default: orientation = 0; break;
    }
  }
  return orientation;
}

// Where output pixel (x, y) of an oriented image comes from, for the
// transposes PIL's exif_transpose applies (w, h: the stored image's size).
struct SourceOf {
  int orientation, w, h;
  void at(int x, int y, int* sx, int* sy) const {
    switch (orientation) {
      case 2: *sx = w - 1 - x; *sy = y; break;              // FLIP_LEFT_RIGHT
      case 3: *sx = w - 1 - x; *sy = h - 1 - y; break;      // ROTATE_180
      case 4: *sx = x; *sy = h - 1 - y; break;              // FLIP_TOP_BOTTOM
      case 5: *sx = y; *sy = x; break;                      // TRANSPOSE
      case 6: *sx = y; *sy = h - 1 - x; break;              // ROTATE_270 (90 clockwise)
      case 7: *sx = w - 1 - y; *sy = h - 1 - x; break;      // TRANSVERSE
      case 8: *sx = w - 1 - y; *sy = x; break;              // ROTATE_90 (counter-clockwise)
      default: *sx = x; *sy = y; break;
    }
  }
};

RgbImage apply_orientation(RgbImage in, std::optional<int64_t> orientation) {
  if (!orientation || *orientation < 2 || *orientation > 8) return in;
  const int o = int(*orientation);
  RgbImage out;
  const bool swaps = o >= 5;
  out.width = swaps ? in.height : in.width;
  out.height = swaps ? in.width : in.height;
  out.pixels.resize(in.pixels.size());
  const SourceOf source{o, in.width, in.height};
  uint8_t* dst = out.pixels.data();
  for (int y = 0; y < out.height; ++y)
    for (int x = 0; x < out.width; ++x, dst += 3) {
      int sx, sy;
      source.at(x, y, &sx, &sy);
      std::memcpy(dst, in.at(sx, sy), 3);
    }
  return out;
}

// ---------------------------------------------------------------- PNG

// State the libpng callbacks reach through their user pointers. Plain data.
struct PngSource {
  const uint8_t* data;
  size_t size;
  size_t pos;
  char message[256];
};

void png_read_memory(png_structp png, png_bytep out, size_t n) {
  auto* src = static_cast<PngSource*>(png_get_io_ptr(png));
  if (n > src->size - src->pos) png_error(png, "the file is truncated");
  std::memcpy(out, src->data + src->pos, n);
  src->pos += n;
}

[[noreturn]] void png_fail(png_structp png, png_const_charp message) {
  auto* src = static_cast<PngSource*>(png_get_error_ptr(png));
  std::snprintf(src->message, sizeof src->message, "%s", message);
  png_longjmp(png, 1);
}

// libpng's warnings (an unknown sRGB profile, a bad ancillary-chunk CRC, extra
// data after the image) leave the pixels as PIL reads them.
void png_ignore_warning(png_structp, png_const_charp) {}

// The bytes up to the first chunk that does not fit in the file. libpng
// allocates (and clears) a chunk's declared length before reading it, so a
// 200-byte file whose text chunk claims 2 GB would cost 2 GB; cut there,
// libpng sees the truncation the file really has, as PIL does.
size_t png_complete_chunks(const uint8_t* data, size_t size) {
  size_t pos = 8;
  while (pos + 12 <= size) {
    const uint64_t length = read_u32(data + pos, true);
    if (length > size - pos - 12) return pos;
    pos += 12 + size_t(length);
  }
  return pos;  // a partial chunk header at the end is cut too
}

struct PngLayout {
  png_uint_32 width, height;
  int bit_depth, color_type;  // after the transforms below
  size_t row_bytes;
};

// Reads the header and sets the transforms: 8 bits per sample except 16-bit
// gray (clipped later, as PIL does), one byte per palette index (mapped
// later through PIL's palette), nothing expanded or composited.
bool png_phase_header(png_structp png, png_infop info, PngLayout* layout) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_user_limits(png, PNG_UINT_31_MAX, PNG_UINT_31_MAX);  // the pixel limit is checked before
  png_read_info(png, info);
  const int depth = png_get_bit_depth(png, info), type = png_get_color_type(png, info);
  if (type == PNG_COLOR_TYPE_PALETTE) png_set_packing(png);
  if (type == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (depth == 16 && type != PNG_COLOR_TYPE_GRAY) png_set_strip_16(png);
  if (png_get_interlace_type(png, info) != PNG_INTERLACE_NONE) png_set_interlace_handling(png);
  png_read_update_info(png, info);
  layout->width = png_get_image_width(png, info);
  layout->height = png_get_image_height(png, info);
  layout->bit_depth = png_get_bit_depth(png, info);
  layout->color_type = png_get_color_type(png, info);
  layout->row_bytes = png_get_rowbytes(png, info);
  return true;
}

bool png_phase_pixels(png_structp png, png_bytepp rows) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_image(png, rows);
  return true;
}

// Chunks after the image (eXIf, text) up to IEND. PIL stops quietly at a
// damaged tail, so a failure here only means no late metadata.
bool png_phase_end(png_structp png, png_infop info) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_end(png, info);
  return true;
}

struct PngReadStruct {
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~PngReadStruct() { png_destroy_read_struct(&png, info ? &info : nullptr, nullptr); }
};

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// ImageMagick's "Raw profile type exif": a header of three lines, then hex.
// PIL: bytes.fromhex("".join(text.split("\n")[3:])). Malformed: nullopt.
std::optional<std::vector<uint8_t>> raw_profile_bytes(const char* text, size_t length) {
  size_t pos = 0;
  for (int newlines = 0; newlines < 3; ++pos) {
    if (pos >= length) return std::nullopt;
    if (text[pos] == '\n') ++newlines;
  }
  std::vector<uint8_t> out;
  int high = -1;
  for (; pos < length; ++pos) {
    const char c = text[pos];
    if (c == '\n') continue;
    if (high < 0 && (c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f')) continue;
    const int d = hex_digit(c);
    if (d < 0) return std::nullopt;
    if (high < 0) {
      high = d;
    } else {
      out.push_back(uint8_t(high << 4 | d));
      high = -1;
    }
  }
  if (high >= 0) return std::nullopt;
  return out;
}

// PIL's re.search(r'tiff:Orientation(="|>)([0-9])', xmp).
std::optional<int64_t> xmp_orientation(const char* text, size_t length) {
  static constexpr char kKey[] = "tiff:Orientation";
  constexpr size_t n = sizeof kKey - 1;
  for (size_t i = 0; i + n < length; ++i) {
    if (std::memcmp(text + i, kKey, n) != 0) continue;
    const char* after = text + i + n;
    const size_t left = length - i - n;
    if (left >= 3 && after[0] == '=' && after[1] == '"' && after[2] >= '0' && after[2] <= '9') return after[2] - '0';
    if (left >= 2 && after[0] == '>' && after[1] >= '0' && after[1] <= '9') return after[1] - '0';
  }
  return std::nullopt;
}

std::optional<int64_t> png_orientation(png_structp png, png_infop info) {
  std::optional<int64_t> orientation;
  png_uint_32 exif_size = 0;
  png_bytep exif = nullptr;
  png_textp texts = nullptr;
  const int num_texts = png_get_text(png, info, &texts, nullptr);
  const png_text* raw_profile = nullptr;
  const png_text* xmp = nullptr;
  for (int i = 0; i < num_texts; ++i) {  // PIL keeps the last chunk of each key
    if (std::strcmp(texts[i].key, "Raw profile type exif") == 0) raw_profile = &texts[i];
    if (std::strcmp(texts[i].key, "XML:com.adobe.xmp") == 0) xmp = &texts[i];
  }
  auto text_length = [](const png_text* t) { return t->text ? std::strlen(t->text) : 0; };
  if (png_get_eXIf_1(png, info, &exif_size, &exif) != 0 && exif != nullptr) {
    orientation = tiff_orientation(exif, exif_size);
  } else if (raw_profile) {
    if (auto bytes = raw_profile_bytes(raw_profile->text, text_length(raw_profile))) {
      const uint8_t* body = bytes->data();
      size_t size = bytes->size();
      if (size >= 6 && std::memcmp(body, "Exif\0\0", 6) == 0) body += 6, size -= 6;
      orientation = tiff_orientation(body, size);
    }
  }
  if (!orientation && xmp) orientation = xmp_orientation(xmp->text, text_length(xmp));
  return orientation;
}

RgbImage decode_png(const uint8_t* data, size_t size, const std::string& name, int64_t max_pixels) {
  // The size, read from IHDR before libpng allocates anything for it.
  if (size < 33 || std::memcmp(data + 12, "IHDR", 4) != 0)
    throw FormatError(name + ": a truncated or malformed PNG (no complete IHDR chunk)");
  const uint64_t width = read_u32(data + 16, true), height = read_u32(data + 20, true);
  check_size(name, "PNG", width, height, max_pixels);
  const uint8_t depth = data[24], channels_by_type[7] = {1, 0, 3, 1, 2, 0, 4};
  const uint8_t channels = data[25] < 7 ? channels_by_type[data[25]] : 0;
  const uint64_t min_pixel_bytes = height * ((width * channels * depth + 7) / 8);
  if (min_pixel_bytes > uint64_t(size) * kMaxDeflateRatio + 65536)
    throw FormatError(name + ": the PNG header claims " + std::to_string(width) + " x " + std::to_string(height) +
                      " pixels, more than its " + std::to_string(size) + " bytes can hold: truncated or corrupt");

  PngSource source{data, png_complete_chunks(data, size), 0, {}};
  PngReadStruct reader;
  reader.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &source, png_fail, png_ignore_warning);
  if (reader.png) reader.info = png_create_info_struct(reader.png);
  if (!reader.png || !reader.info) throw FormatError(name + ": cannot start the PNG decoder (out of memory)");
  png_set_read_fn(reader.png, &source, png_read_memory);
  png_set_benign_errors(reader.png, 1);
  png_set_chunk_malloc_max(reader.png, kMaxPngChunkBytes);
  auto fail = [&]() { return FormatError(name + ": a corrupt or truncated PNG (libpng: " + source.message + ")"); };

  PngLayout layout{};
  if (!png_phase_header(reader.png, reader.info, &layout)) throw fail();
  if (layout.width != width || layout.height != height || layout.row_bytes == 0)
    throw FormatError(name + ": an inconsistent PNG header");
  const int samples = layout.color_type == PNG_COLOR_TYPE_GRAY         ? 1
                      : layout.color_type == PNG_COLOR_TYPE_GRAY_ALPHA ? 2
                      : layout.color_type == PNG_COLOR_TYPE_RGB        ? 3
                      : layout.color_type == PNG_COLOR_TYPE_RGB_ALPHA  ? 4
                      : layout.color_type == PNG_COLOR_TYPE_PALETTE    ? 1
                                                                       : 0;
  const size_t bytes_per_sample = layout.bit_depth == 16 ? 2 : 1;
  if (samples == 0 || (layout.bit_depth != 8 && layout.bit_depth != 16) ||
      layout.row_bytes != size_t(width) * samples * bytes_per_sample)
    throw FormatError(name + ": a PNG layout this decoder does not expect (color type " +
                      std::to_string(layout.color_type) + ", " + std::to_string(layout.bit_depth) + " bits)");

  std::vector<uint8_t> raw(layout.row_bytes * height);
  std::vector<png_bytep> rows(height);
  for (size_t y = 0; y < height; ++y) rows[y] = raw.data() + y * layout.row_bytes;
  if (!png_phase_pixels(reader.png, rows.data())) throw fail();
  png_phase_end(reader.png, reader.info);

  // PIL's palette: index i past the PLTE entries reads as (i, i, i).
  uint8_t palette[256][3];
  for (int i = 0; i < 256; ++i) palette[i][0] = palette[i][1] = palette[i][2] = uint8_t(i);
  if (layout.color_type == PNG_COLOR_TYPE_PALETTE) {
    png_colorp entries = nullptr;
    int count = 0;
    if (png_get_PLTE(reader.png, reader.info, &entries, &count) != 0 && entries != nullptr)
      for (int i = 0; i < count && i < 256; ++i) {
        palette[i][0] = entries[i].red;
        palette[i][1] = entries[i].green;
        palette[i][2] = entries[i].blue;
      }
  }

  RgbImage image;
  image.width = int(width);
  image.height = int(height);
  image.pixels.resize(size_t(width) * height * 3);
  uint8_t* out = image.pixels.data();
  const size_t pixels = size_t(width) * height;
  const uint8_t* in = raw.data();
  switch (layout.color_type) {
    case PNG_COLOR_TYPE_GRAY:
      for (size_t i = 0; i < pixels; ++i, out += 3) {
        uint32_t v = in[i * bytes_per_sample];
        if (bytes_per_sample == 2) {  // mode "I" to "RGB" clips
          v = v << 8 | in[i * 2 + 1];
          if (v > 255) v = 255;
        }
        out[0] = out[1] = out[2] = uint8_t(v);
      }
      break;
    case PNG_COLOR_TYPE_GRAY_ALPHA:
      for (size_t i = 0; i < pixels; ++i, out += 3) out[0] = out[1] = out[2] = in[i * 2];
      break;
    case PNG_COLOR_TYPE_RGB: std::memcpy(out, in, pixels * 3); break;
    case PNG_COLOR_TYPE_RGB_ALPHA:
      for (size_t i = 0; i < pixels; ++i, out += 3) std::memcpy(out, in + i * 4, 3);
      break;
    case PNG_COLOR_TYPE_PALETTE:
      for (size_t i = 0; i < pixels; ++i, out += 3) std::memcpy(out, palette[in[i]], 3);
      break;
  }
  return apply_orientation(std::move(image), png_orientation(reader.png, reader.info));
}

// ---------------------------------------------------------------- JPEG

struct JpegErrors {
  jpeg_error_mgr pub;  // first: libjpeg hands back a pointer to it
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  bool over_scan_limit;  // the file is well-formed, but costs too much
};

[[noreturn]] void jpeg_fail(j_common_ptr cinfo) {
  auto* errors = reinterpret_cast<JpegErrors*>(cinfo->err);
  cinfo->err->format_message(cinfo, errors->message);
  std::longjmp(errors->jump, 1);
}

// Warnings about corrupt data (a truncated file, bad Huffman codes, missing
// markers) mean libjpeg would fill in grey: they are errors here. The ones
// that leave every pixel decoded are let through.
void jpeg_on_message(j_common_ptr cinfo, int level) {
  if (level >= 0) return;  // trace messages
  const int code = cinfo->err->msg_code;
  if (code == JWRN_JFIF_MAJOR || code == JWRN_ADOBE_XFORM || code == JWRN_BOGUS_ICC) {
    cinfo->err->num_warnings++;
    return;
  }
  jpeg_fail(cinfo);
}

// libjpeg calls this as it reads the input; it ends files with too many scans.
void jpeg_limit_scans(j_common_ptr cinfo) {
  const auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (d->input_scan_number <= kMaxJpegScans) return;
  auto* errors = reinterpret_cast<JpegErrors*>(cinfo->err);
  std::snprintf(errors->message, sizeof errors->message, "more than %d progressive scans, the limit (kMaxJpegScans)",
                kMaxJpegScans);
  errors->over_scan_limit = true;
  std::longjmp(errors->jump, 1);
}

struct JpegDecompress {
  jpeg_decompress_struct cinfo;
  JpegErrors errors;
  jpeg_progress_mgr progress;
  JpegDecompress() {
    std::memset(&cinfo, 0, sizeof cinfo);
    std::memset(&errors, 0, sizeof errors);
    std::memset(&progress, 0, sizeof progress);
    progress.progress_monitor = jpeg_limit_scans;
    cinfo.err = jpeg_std_error(&errors.pub);
    errors.pub.error_exit = jpeg_fail;
    errors.pub.emit_message = jpeg_on_message;
  }
  ~JpegDecompress() { jpeg_destroy_decompress(&cinfo); }  // safe on a half-created one
  JpegDecompress(const JpegDecompress&) = delete;
  JpegDecompress& operator=(const JpegDecompress&) = delete;
};

bool jpeg_phase_header(JpegDecompress* d, const uint8_t* data, size_t size) {
  if (setjmp(d->errors.jump)) return false;
  jpeg_create_decompress(&d->cinfo);
  d->cinfo.progress = &d->progress;
  jpeg_mem_src(&d->cinfo, data, static_cast<unsigned long>(size));
  jpeg_save_markers(&d->cinfo, JPEG_APP0 + 1, 0xFFFF);
  jpeg_read_header(&d->cinfo, TRUE);
  return true;
}

// PIL's cmyk2rgb on samples inverted as "CMYK;I" reads them.
uint8_t cmyk_channel(uint8_t stored_ink, uint8_t stored_black) {
  const int ink = 255 - stored_ink, nk = stored_black;  // nk = 255 - (255 - stored_black)
  const int t = ink * nk + 128;
  const int v = nk - (((t >> 8) + t) >> 8);
  return uint8_t(v < 0 ? 0 : v > 255 ? 255 : v);
}

// One decoded scanline (`components` bytes a pixel) as RGB, the way PIL
// converts L and CMYK.
void to_rgb(const uint8_t* row, size_t width, int components, uint8_t* out) {
  if (components == 3) {
    std::memcpy(out, row, width * 3);
  } else if (components == 1) {
    for (size_t x = 0; x < width; ++x, out += 3) out[0] = out[1] = out[2] = row[x];
  } else {
    for (size_t x = 0; x < width; ++x, out += 3, row += 4)
      for (int ch = 0; ch < 3; ++ch) out[ch] = cmyk_channel(row[ch], row[3]);
  }
}

// Decodes every scanline with libjpeg's defaults, as PIL does, appending
// each as RGB to `pixels` (reserved by the caller, so appending never
// reallocates and a truncated file touches only the rows it has), and reads
// on to EOI.
bool jpeg_phase_pixels(JpegDecompress* d, J_COLOR_SPACE space, int components, uint8_t* row,
                       std::vector<uint8_t>* pixels) {
  if (setjmp(d->errors.jump)) return false;
  jpeg_decompress_struct* c = &d->cinfo;
  c->out_color_space = space;
  jpeg_start_decompress(c);
  if (c->output_components != components || c->output_width != c->image_width ||
      c->output_height != c->image_height) {
    std::snprintf(d->errors.message, sizeof d->errors.message, "unexpected output layout");
    return false;
  }
  const size_t width = c->output_width;
  while (c->output_scanline < c->output_height) {
    if (jpeg_read_scanlines(c, &row, 1) != 1) {
      std::snprintf(d->errors.message, sizeof d->errors.message, "no scanline returned");
      return false;
    }
    const size_t at = pixels->size();
    pixels->resize(at + width * 3);
    to_rgb(row, width, components, pixels->data() + at);
  }
  jpeg_finish_decompress(c);
  return true;
}

std::optional<int64_t> jpeg_orientation(const jpeg_decompress_struct& cinfo) {
  for (jpeg_saved_marker_ptr m = cinfo.marker_list; m != nullptr; m = m->next) {
    if (m->marker != JPEG_APP0 + 1 || m->data_length < 5 || std::memcmp(m->data, "Exif\0", 5) != 0) continue;
    // PIL keeps only the first Exif segment, and reads it as TIFF once the
    // 6-byte "Exif\0\0" prefix is stripped.
    if (m->data_length < 6 || m->data[5] != 0) return std::nullopt;
    return tiff_orientation(m->data + 6, m->data_length - 6);
  }
  return std::nullopt;
}

RgbImage decode_jpeg(const uint8_t* data, size_t size, const std::string& name, int64_t max_pixels) {
  JpegDecompress d;
  auto fail = [&]() {
    if (d.errors.over_scan_limit) throw InputError(name + ": the JPEG has " + d.errors.message);
    throw FormatError(name + ": a corrupt or truncated JPEG (libjpeg: " + d.errors.message + ")");
  };
  if (!jpeg_phase_header(&d, data, size)) fail();
  const jpeg_decompress_struct& c = d.cinfo;
  check_size(name, "JPEG", c.image_width, c.image_height, max_pixels);
  const int components = c.num_components;
  J_COLOR_SPACE space;
  if (components == 1)
    space = JCS_GRAYSCALE;
  else if (components == 3)
    space = JCS_RGB;
  else if (components == 4)
    space = JCS_CMYK;
  else
    throw FormatError(name + ": a JPEG with " + std::to_string(components) +
                      " components (PIL, and splitdec, read 1, 3 or 4)");
  const std::optional<int64_t> orientation = jpeg_orientation(c);

  const size_t width = c.image_width, height = c.image_height;
  RgbImage image;
  image.width = int(width);
  image.height = int(height);
  image.pixels.reserve(width * height * 3);
  std::vector<uint8_t> row(width * size_t(components));
  if (!jpeg_phase_pixels(&d, space, components, row.data(), &image.pixels)) fail();
  if (image.pixels.size() != width * height * 3) throw FormatError(name + ": the JPEG decoder returned too few rows");
  return apply_orientation(std::move(image), orientation);
}

}  // namespace

std::string describe_other_format(const uint8_t* data, size_t size) {
  if (size == 0) return "an empty file";
  if (starts_with(data, size, "GIF87a", 6) || starts_with(data, size, "GIF89a", 6)) return "a GIF image";
  if (starts_with(data, size, "BM", 2)) return "what looks like a BMP image";
  if (size >= 12 && starts_with(data, size, "RIFF", 4) && std::memcmp(data + 8, "WEBP", 4) == 0) return "a WebP image";
  if (starts_with(data, size, "II*\0", 4) || starts_with(data, size, "MM\0*", 4)) return "a TIFF image";
  if (size >= 12 && std::memcmp(data + 4, "ftyp", 4) == 0) return "an ISO media file (HEIC/AVIF/MP4)";
  if (size >= 12 && starts_with(data, size, "RIFF", 4) && std::memcmp(data + 8, "WAVE", 4) == 0) return "a WAV file";
  if (starts_with(data, size, "fLaC", 4)) return "a FLAC file";
  size_t printable = 0;
  const size_t n = size < 64 ? size : 64;
  for (size_t i = 0; i < n; ++i)
    if ((data[i] >= 0x20 && data[i] < 0x7F) || data[i] == '\n' || data[i] == '\r' || data[i] == '\t') ++printable;
  if (printable == n) return "text";
  char hex[3 * 8 + 1] = {};
  for (size_t i = 0; i < 8 && i < size; ++i) std::snprintf(hex + 3 * i, 4, "%02x ", data[i]);
  std::string h(hex);
  if (!h.empty()) h.pop_back();
  return "unknown data starting with bytes " + h;
}

bool looks_like_image(const uint8_t* data, size_t size) { return is_png(data, size) || is_jpeg(data, size); }

RgbImage decode_image(const uint8_t* data, size_t size, const std::string& name, int64_t max_pixels) {
  max_pixels = std::min(max_pixels > 0 ? max_pixels : kMaxImagePixels, kMaxImagePixels);
  if (is_png(data, size)) return decode_png(data, size, name, max_pixels);
  if (is_jpeg(data, size)) return decode_jpeg(data, size, name, max_pixels);
  throw InputError(name + ": not a PNG or JPEG image (found " + describe_other_format(data, size) +
                   "); convert it first, e.g. `convert in.gif out.png`");
}

RgbImage read_image_file(const std::string& path, int64_t max_pixels) {
  struct CloseFile {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::unique_ptr<std::FILE, CloseFile> file(std::fopen(path.c_str(), "rb"));
  if (!file) throw InputError(path + ": cannot open the image file (" + std::strerror(errno) + ")");
  std::vector<uint8_t> bytes;
  uint8_t chunk[1 << 16];
  for (;;) {
    const size_t n = std::fread(chunk, 1, sizeof chunk, file.get());
    if (n == 0) break;
    if (bytes.size() + n > kMaxImageFileBytes)
      throw InputError(path + ": the image file is larger than the limit of " + std::to_string(kMaxImageFileBytes) +
                       " bytes");
    bytes.insert(bytes.end(), chunk, chunk + n);
  }
  if (std::ferror(file.get())) throw InputError(path + ": cannot read the image file (" + std::strerror(errno) + ")");
  return decode_image(bytes.data(), bytes.size(), path, max_pixels);
}

}  // namespace splitdec
