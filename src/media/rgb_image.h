// A decoded picture: 8-bit RGB, row-major, three bytes per pixel (HWC), the
// form PIL's Image.convert("RGB") gives and every Gemma processor starts from.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace splitdec {

struct RgbImage {
  int width = 0, height = 0;
  std::vector<uint8_t> pixels;  // [height, width, 3]

  const uint8_t* at(int x, int y) const { return pixels.data() + (size_t(y) * size_t(width) + size_t(x)) * 3; }
};

}  // namespace splitdec
