#include "kernels/weight_matrix.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "core/error.h"

#include "kernels/linear.h"

namespace splitdec {

const char* weight_format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::F32: return "f32";
    case WeightFormat::BF16: return "bf16";
    case WeightFormat::F16: return "f16";
    case WeightFormat::Q8_0: return "q8_0";
  }
  return "?";
}

WeightFormat weight_format_of(DType t) {
  switch (t) {
    case DType::F32: return WeightFormat::F32;
    case DType::BF16: return WeightFormat::BF16;
    case DType::F16: return WeightFormat::F16;
  }
  return WeightFormat::F32;
}

size_t weight_row_bytes(WeightFormat f, int in) {
  if (f == WeightFormat::Q8_0) return size_t(in / 32) * 34;
  return size_t(in) * (f == WeightFormat::F32 ? 4 : 2);
}

bool weight_format_fits(WeightFormat f, int in) { return f != WeightFormat::Q8_0 || in % 32 == 0; }

namespace {

void quantize_row_q8_0(const float* x, int n, uint8_t* out) {
  for (int b = 0; b < n / 32; ++b, out += 34) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::abs(x[b * 32 + j]));
    // Q8_0's scale is an f16: a block beyond 127 * 65504 cannot be stored.
    if (!(amax <= 127.f * 65504.f))
      throw InputError("a block's largest weight " + std::to_string(amax) + " is beyond Q8_0's range (127 x 65504, the f16 scale's)");
    const float d = amax / 127.f, id = d >= std::numeric_limits<float>::min() ? 1.f / d : 0.f;
    const uint16_t h = f32_to_f16(d);
    std::memcpy(out, &h, 2);
    // roundf (half away from zero), in double so that x * id + 0.5 is exact.
    for (int j = 0; j < 32; ++j) {
      const double v = double(x[b * 32 + j] * id);
      out[2 + j] = uint8_t(int8_t(int(std::trunc(v + std::copysign(0.5, v)))));
    }
  }
}

}  // namespace

WeightMatrix WeightMatrix::from_bytes(WeightFormat format, int out, int in, const void* bytes) {
  WeightMatrix m;
  m.out = out, m.in = in, m.format = format;
  m.data.resize(size_t(out) * m.row_bytes());
  if (!m.data.empty()) std::memcpy(m.data.data(), bytes, m.data.size());
  return m;
}

WeightMatrix WeightMatrix::zeros(WeightFormat format, int out, int in) {
  if (!weight_format_fits(format, in))
    throw InputError("a row of " + std::to_string(in) + " values cannot be stored as " + weight_format_name(format) +
                     " (its blocks hold 32)");
  WeightMatrix m;
  m.out = out, m.in = in, m.format = format;
  m.data.resize(size_t(out) * m.row_bytes());
  return m;
}

void WeightMatrix::set_rows_f32(int r0, int rows, const float* values) {
  for (int r = 0; r < rows; ++r) {
    const float* x = values + size_t(r) * size_t(in);
    uint8_t* dst = data.data() + size_t(r0 + r) * row_bytes();
    switch (format) {
      case WeightFormat::Q8_0: quantize_row_q8_0(x, in, dst); break;
      case WeightFormat::F32: std::memcpy(dst, x, size_t(in) * 4); break;
      case WeightFormat::BF16:
      case WeightFormat::F16:
        for (int k = 0; k < in; ++k) {
          const uint16_t h = format == WeightFormat::BF16 ? f32_to_bf16(x[k]) : f32_to_f16(x[k]);
          std::memcpy(dst + 2 * k, &h, 2);
        }
        break;
    }
  }
}

WeightMatrix WeightMatrix::from_f32(WeightFormat format, int out, int in, const float* values) {
  WeightMatrix m = zeros(format, out, in);
  m.set_rows_f32(0, out, values);
  return m;
}

void WeightMatrix::row_f32(int o, float* dst) const { row_kernels(format).to_f32(simd::best(), row(o), in, dst); }

}  // namespace splitdec
