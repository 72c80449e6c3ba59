#include "media/reference_resize.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"

namespace splitdec {

namespace {

constexpr int kFractionBits = 22;  // PIL's PRECISION_BITS for 8-bit images

double filter_weight(ResampleFilter filter, double x) {
  x = std::fabs(x);
  if (filter == ResampleFilter::Bilinear) return x < 1.0 ? 1.0 - x : 0.0;
  constexpr double a = -0.5;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
  return 0.0;
}

// [out][in] fixed-point weights of one axis: output o reads input i with
// weight[o * in + i]; zero outside the filter's support.
std::vector<int64_t> weight_matrix(int in, int out, ResampleFilter filter) {
  const double scale = double(in) / out;
  const double stretch = std::max(scale, 1.0);  // antialiasing when shrinking
  const double inv_stretch = 1.0 / stretch;     // PIL multiplies by the inverse
  std::vector<int64_t> m(size_t(out) * size_t(in), 0);
  std::vector<double> w(in);
  for (int o = 0; o < out; ++o) {
    const double center = (o + 0.5) * scale;
    double sum = 0.0;
    for (int i = 0; i < in; ++i) {
      w[i] = filter_weight(filter, (i - center + 0.5) * inv_stretch);
      sum += w[i];
    }
    for (int i = 0; i < in; ++i) {
      const double normalized = sum != 0.0 ? w[i] / sum : w[i];
      const double scaled = normalized * double(int64_t(1) << kFractionBits);
      m[size_t(o) * size_t(in) + size_t(i)] = int64_t(normalized < 0 ? scaled - 0.5 : scaled + 0.5);
    }
  }
  return m;
}

uint8_t settle(int64_t sum) {
  const int64_t v = (sum + (int64_t(1) << (kFractionBits - 1))) >> kFractionBits;  // floor
  return uint8_t(std::clamp<int64_t>(v, 0, 255));
}

RgbImage resize_width(const RgbImage& src, int width, ResampleFilter filter) {
  const std::vector<int64_t> m = weight_matrix(src.width, width, filter);
  RgbImage out{width, src.height, std::vector<uint8_t>(size_t(width) * size_t(src.height) * 3)};
  for (int y = 0; y < src.height; ++y)
    for (int o = 0; o < width; ++o)
      for (int c = 0; c < 3; ++c) {
        int64_t sum = 0;
        for (int i = 0; i < src.width; ++i) sum += m[size_t(o) * size_t(src.width) + size_t(i)] * src.at(i, y)[c];
        out.pixels[(size_t(y) * size_t(width) + size_t(o)) * 3 + size_t(c)] = settle(sum);
      }
  return out;
}

RgbImage resize_height(const RgbImage& src, int height, ResampleFilter filter) {
  const std::vector<int64_t> m = weight_matrix(src.height, height, filter);
  RgbImage out{src.width, height, std::vector<uint8_t>(size_t(src.width) * size_t(height) * 3)};
  for (int o = 0; o < height; ++o)
    for (int x = 0; x < src.width; ++x)
      for (int c = 0; c < 3; ++c) {
        int64_t sum = 0;
        for (int i = 0; i < src.height; ++i) sum += m[size_t(o) * size_t(src.height) + size_t(i)] * src.at(x, i)[c];
        out.pixels[(size_t(o) * size_t(src.width) + size_t(x)) * 3 + size_t(c)] = settle(sum);
      }
  return out;
}

}  // namespace

RgbImage reference_resize(const RgbImage& src, int width, int height, ResampleFilter filter) {
  if (src.width < 1 || src.height < 1 || width < 1 || height < 1)
    throw InputError("reference_resize: " + std::to_string(src.width) + "x" + std::to_string(src.height) + " to " +
                     std::to_string(width) + "x" + std::to_string(height) + ": both sizes must be at least 1x1");
  if (src.pixels.size() != size_t(src.width) * size_t(src.height) * 3)
    throw InputError("reference_resize: the pixel buffer does not match the image size");
  RgbImage out = src;
  if (width != src.width) out = resize_width(out, width, filter);
  if (height != src.height) out = resize_height(out, height, filter);
  return out;
}

}  // namespace splitdec
