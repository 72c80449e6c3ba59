#include "kernels/weight_matrix.h"

#include <cstring>

#include "kernels/linear.h"

namespace splitdec {

const char* weight_format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::F32: return "f32";
    case WeightFormat::BF16: return "bf16";
    case WeightFormat::F16: return "f16";
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
  return size_t(in) * (f == WeightFormat::F32 ? 4 : 2);
}

WeightMatrix WeightMatrix::from_bytes(WeightFormat format, int out, int in, const void* bytes) {
  WeightMatrix m;
  m.out = out, m.in = in, m.format = format;
  m.data.resize(size_t(out) * m.row_bytes());
  if (!m.data.empty()) std::memcpy(m.data.data(), bytes, m.data.size());
  return m;
}

WeightMatrix WeightMatrix::from_f32(WeightFormat format, int out, int in, const float* values) {
  WeightMatrix m;
  m.out = out, m.in = in, m.format = format;
  const size_t n = size_t(out) * size_t(in);
  m.data.resize(size_t(out) * m.row_bytes());
  if (format == WeightFormat::F32) {
    if (n) std::memcpy(m.data.data(), values, n * 4);
    return m;
  }
  for (size_t k = 0; k < n; ++k) {
    const uint16_t h = format == WeightFormat::BF16 ? f32_to_bf16(values[k]) : f32_to_f16(values[k]);
    std::memcpy(m.data.data() + 2 * k, &h, 2);
  }
  return m;
}

void WeightMatrix::row_f32(int o, float* dst) const { row_kernels(format).to_f32(simd::best(), row(o), in, dst); }

}  // namespace splitdec
