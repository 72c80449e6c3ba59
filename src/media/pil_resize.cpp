#include "media/pil_resize.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"

// The facts followed here are PIL 9.4's (libImaging/Resample.c and
// Image.resize): a separable convolution, horizontal pass first into an
// 8-bit image holding only the rows the vertical pass reads, each pass
// skipped when its dimension does not change. Coefficients are computed in
// double per output pixel, normalized to sum 1, then rounded to fixed point
// with 22 fraction bits; sums start at one half and are shifted down and
// clamped to 0..255.

namespace splitdec {

namespace {

// 32 bits = 8 for the value, 2 of headroom for negative lobes and sums over
// 1, the rest for the fraction (PIL's PRECISION_BITS).
constexpr int kFractionBits = 32 - 8 - 2;
// Sides beyond 2^24 are not exact in PIL's float box; pixel counts beyond
// 2^28 (768 MiB of RGB) are not an image a frontend should build.
constexpr int kMaxSide = 1 << 24;
constexpr int64_t kMaxPixels = int64_t(1) << 28;

double bilinear_weight(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

// Keys' cubic convolution with a = -0.5 (PIL's BICUBIC).
double bicubic_weight(double x) {
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
  return 0.0;
}

struct Filter {
  double (*weight)(double);
  double support;  // half-width at scale 1
};

Filter filter_of(ResampleFilter f) {
  return f == ResampleFilter::Bicubic ? Filter{bicubic_weight, 2.0} : Filter{bilinear_weight, 1.0};
}

// For every output coordinate of one axis: the first input it reads, how
// many, and their fixed-point weights (stride `taps`).
struct AxisWeights {
  int taps = 0;
  std::vector<int> first, count;
  std::vector<int32_t> weights;
};

int32_t to_fixed(double w) {
  // Rounds half away from zero, as PIL's normalize_coeffs_8bpc does.
  const double scaled = w * double(1 << kFractionBits);
  return int32_t(w < 0 ? scaled - 0.5 : scaled + 0.5);
}

AxisWeights axis_weights(int in_size, int out_size, const Filter& filter) {
  const double scale = double(in_size) / out_size;
  // Antialiasing: when shrinking, the filter is stretched by the scale.
  const double filter_scale = std::max(scale, 1.0);
  const double support = filter.support * filter_scale;
  const double inv_filter_scale = 1.0 / filter_scale;

  AxisWeights a;
  a.taps = int(std::ceil(support)) * 2 + 1;
  a.first.resize(out_size);
  a.count.resize(out_size);
  a.weights.assign(size_t(out_size) * size_t(a.taps), 0);
  std::vector<double> w(a.taps);
  for (int o = 0; o < out_size; ++o) {
    const double center = (o + 0.5) * scale;
    // PIL rounds the window ends by adding 0.5 and truncating.
    const int lo = std::max(0, int(center - support + 0.5));
    const int hi = std::min(in_size, int(center + support + 0.5));
    const int n = hi - lo;
    double sum = 0.0;
    for (int i = 0; i < n; ++i) {
      w[i] = filter.weight((i + lo - center + 0.5) * inv_filter_scale);
      sum += w[i];
    }
    int32_t* out = a.weights.data() + size_t(o) * size_t(a.taps);
    for (int i = 0; i < n; ++i) out[i] = to_fixed(sum != 0.0 ? w[i] / sum : w[i]);
    a.first[o] = lo;
    a.count[o] = n;
  }
  return a;
}

uint8_t clamp_fixed(int32_t acc) {
  const int32_t v = acc >> kFractionBits;  // arithmetic: floor for negative sums
  return uint8_t(std::clamp<int32_t>(v, 0, 255));
}

constexpr int32_t kHalf = int32_t(1) << (kFractionBits - 1);

// Rows per parallel range: enough multiply-adds that a thread is worth it.
int64_t row_grain(int64_t work_per_row) { return std::max<int64_t>(1, (int64_t(1) << 16) / std::max<int64_t>(1, work_per_row)); }

// Horizontal pass over source rows [row0, row0 + rows) into `dst` (rows x out_w).
void resample_rows(const RgbImage& src, int row0, int rows, const AxisWeights& a, int out_w, uint8_t* dst) {
  const size_t src_stride = size_t(src.width) * 3, dst_stride = size_t(out_w) * 3;
  ThreadPool::global()->parallel_for(
      rows,
      [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          const uint8_t* in = src.pixels.data() + size_t(row0 + r) * src_stride;
          uint8_t* out = dst + size_t(r) * dst_stride;
          for (int x = 0; x < out_w; ++x) {
            const int32_t* k = a.weights.data() + size_t(x) * size_t(a.taps);
            const uint8_t* p = in + size_t(a.first[x]) * 3;
            int32_t s0 = kHalf, s1 = kHalf, s2 = kHalf;
            for (int i = 0, n = a.count[x]; i < n; ++i, p += 3) {
              s0 += int32_t(p[0]) * k[i];
              s1 += int32_t(p[1]) * k[i];
              s2 += int32_t(p[2]) * k[i];
            }
            out[x * 3 + 0] = clamp_fixed(s0);
            out[x * 3 + 1] = clamp_fixed(s1);
            out[x * 3 + 2] = clamp_fixed(s2);
          }
        }
      },
      row_grain(int64_t(out_w) * 3 * a.taps));
}

// Vertical pass: `src` rows are `shift` rows below the first row the weights
// name (the horizontal pass kept only the rows in use).
void resample_columns(const uint8_t* src, int width, int shift, const AxisWeights& a, int out_h, uint8_t* dst) {
  const size_t stride = size_t(width) * 3;
  ThreadPool::global()->parallel_for(
      out_h,
      [&](int64_t begin, int64_t end) {
        // Row-at-a-time accumulation: every tap adds one contiguous source row.
        std::vector<int32_t> acc(stride);
        for (int64_t y = begin; y < end; ++y) {
          std::fill(acc.begin(), acc.end(), kHalf);
          const int32_t* k = a.weights.data() + size_t(y) * size_t(a.taps);
          for (int i = 0, n = a.count[y]; i < n; ++i) {
            const uint8_t* row = src + size_t(a.first[y] - shift + i) * stride;
            const int32_t ki = k[i];
            for (size_t j = 0; j < stride; ++j) acc[j] += int32_t(row[j]) * ki;
          }
          uint8_t* out = dst + size_t(y) * stride;
          for (size_t j = 0; j < stride; ++j) out[j] = clamp_fixed(acc[j]);
        }
      },
      row_grain(int64_t(stride) * a.taps));
}

std::string dims(int64_t w, int64_t h) { return std::to_string(w) + "x" + std::to_string(h); }

void check_sizes(const RgbImage& src, int width, int height) {
  if (src.width < 1 || src.height < 1)
    throw InputError("resize: the source image is " + dims(src.width, src.height) + " (at least 1x1 is needed)");
  if (width < 1 || height < 1)
    throw InputError("resize: the target size " + dims(width, height) + " is not at least 1x1");
  if (src.width > kMaxSide || src.height > kMaxSide || width > kMaxSide || height > kMaxSide)
    throw InputError("resize " + dims(src.width, src.height) + " to " + dims(width, height) + ": a side exceeds the " +
                     std::to_string(kMaxSide) + "-pixel limit");
  const size_t expected = size_t(src.width) * size_t(src.height) * 3;
  if (src.pixels.size() != expected)
    throw InputError("resize: the " + dims(src.width, src.height) + " RGB image holds " +
                     std::to_string(src.pixels.size()) + " bytes, not " + std::to_string(expected));
  if (int64_t(width) * height > kMaxPixels)
    throw InputError("resize to " + dims(width, height) + ": more than the " + std::to_string(kMaxPixels) +
                     "-pixel limit");
}

}  // namespace

RgbImage pil_resize(const RgbImage& src, int width, int height, ResampleFilter filter) {
  check_sizes(src, width, height);
  // Image.resize returns a copy for the same size (no filtering at all).
  if (width == src.width && height == src.height) return src;

  const Filter f = filter_of(filter);
  const bool horizontal = width != src.width, vertical = height != src.height;
  // The vertical weights are needed first: they tell which source rows the
  // horizontal pass must produce.
  AxisWeights wy;
  int row0 = 0, rows = src.height;
  if (vertical) {
    wy = axis_weights(src.height, height, f);
    row0 = wy.first.front();
    rows = wy.first.back() + wy.count.back() - row0;
  }

  RgbImage out;
  out.width = width;
  out.height = height;
  std::vector<uint8_t> temp;
  const uint8_t* columns_src = src.pixels.data();
  if (horizontal) {
    if (int64_t(width) * rows > kMaxPixels)
      throw InputError("resize " + dims(src.width, src.height) + " to " + dims(width, height) +
                       ": the intermediate image " + dims(width, rows) + " exceeds the " +
                       std::to_string(kMaxPixels) + "-pixel limit");
    const AxisWeights wx = axis_weights(src.width, width, f);
    if (!vertical) {
      out.pixels.resize(size_t(width) * size_t(height) * 3);
      resample_rows(src, 0, src.height, wx, width, out.pixels.data());
      return out;
    }
    temp.resize(size_t(width) * size_t(rows) * 3);
    resample_rows(src, row0, rows, wx, width, temp.data());
    columns_src = temp.data();
  } else {
    row0 = 0;  // the source itself: rows are not shifted
  }
  out.pixels.resize(size_t(width) * size_t(height) * 3);
  resample_columns(columns_src, width, row0, wy, height, out.pixels.data());
  return out;
}

}  // namespace splitdec
