// PNG and JPEG files to RGB with the decoders PIL uses (libpng,
// libjpeg-turbo), so the pixels are the ones Hugging Face's processors see.
// The EXIF orientation tag of a JPEG is applied, as transformers'
// load_image does (ImageOps.exif_transpose, then convert("RGB")). Grayscale, palette, alpha (dropped, as
// Image.convert("RGB") does), 16-bit PNG (scaled to 8 bits as PIL does) and
// CMYK JPEG (converted as PIL does) are handled; anything else is an
// InputError naming the file and what was found.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "media/rgb_image.h"

namespace splitdec {

// Images with more pixels than this are refused before decoding (a
// 30000x30000 PNG would need 2.7 GB): the limit is named in the error.
constexpr int64_t kMaxImagePixels = int64_t(1) << 27;  // 134 M pixels, e.g. 16384 x 8192

// Picks the decoder from the file's magic bytes, not its name.
// `max_pixels`: a lower limit than kMaxImagePixels (a server's); 0: kMaxImagePixels.
RgbImage read_image_file(const std::string& path, int64_t max_pixels = 0);
// `name` is used in error messages.
RgbImage decode_image(const uint8_t* data, size_t size, const std::string& name, int64_t max_pixels = 0);
// True when the bytes start like a PNG or JPEG file.
bool looks_like_image(const uint8_t* data, size_t size);
// What bytes that are neither PNG nor JPEG look like, for error messages
// ("a GIF image", "text", "unknown data starting with bytes ...").
std::string describe_other_format(const uint8_t* data, size_t size);

}  // namespace splitdec
