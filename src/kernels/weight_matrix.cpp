#include "kernels/weight_matrix.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/ggml_block_formats.h"

#include "kernels/row_kernels.h"
#include "kernels/simd/row_groups.h"

namespace splitdec {

const char* weight_format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::F32: return "f32";
    case WeightFormat::BF16: return "bf16";
    case WeightFormat::F16: return "f16";
    case WeightFormat::Q8_0: return "q8_0";
    case WeightFormat::Q4_0: return "q4_0";
    case WeightFormat::Q4_K: return "q4_k";
    case WeightFormat::Q5_K: return "q5_k";
    case WeightFormat::Q6_K: return "q6_k";
  }
  return "?";
}

WeightFormat weight_format_of(DType t) {
  switch (t) {
    case DType::F32: return WeightFormat::F32;
    case DType::BF16: return WeightFormat::BF16;
    case DType::F16: return WeightFormat::F16;
    case DType::I8:
    case DType::U8: break;  // block values without their scales: model/quantized_tensors.h reads them
  }
  throw Error(std::string("weight_format_of: ") + dtype_name(t) + " holds no weight format by itself");
}

bool weight_format_is_blocked(WeightFormat f) { return weight_block_values(f) > 1; }

int weight_block_values(WeightFormat f) {
  switch (f) {
    case WeightFormat::Q8_0:
    case WeightFormat::Q4_0: return 32;
    case WeightFormat::Q4_K:
    case WeightFormat::Q5_K:
    case WeightFormat::Q6_K: return 256;
    case WeightFormat::F32:
    case WeightFormat::BF16:
    case WeightFormat::F16: break;
  }
  return 1;
}

size_t weight_row_bytes(WeightFormat f, int in) {
  switch (f) {
    case WeightFormat::Q8_0: return size_t(in / 32) * 34;
    case WeightFormat::Q4_0: return size_t(in / 32) * 18;
    case WeightFormat::Q4_K: return size_t(in / 256) * 144;
    case WeightFormat::Q5_K: return size_t(in / 256) * 176;
    case WeightFormat::Q6_K: return size_t(in / 256) * 210;
    case WeightFormat::F32: return size_t(in) * 4;
    case WeightFormat::BF16:
    case WeightFormat::F16: return size_t(in) * 2;
  }
  return 0;
}

bool weight_format_fits(WeightFormat f, int in) { return in % weight_block_values(f) == 0; }

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

void quantize_row_q4_0(const float* x, int n, uint8_t* out) {
  for (int b = 0; b < n / 32; ++b, out += 18) {
    const float* xb = x + b * 32;
    float amax = 0, max = 0;  // the value of largest magnitude, with its sign
    for (int j = 0; j < 32; ++j)
      if (amax < std::abs(xb[j])) amax = std::abs(xb[j]), max = xb[j];
    if (!(amax <= 8.f * 65504.f))
      throw InputError("a block's largest weight " + std::to_string(amax) + " is beyond Q4_0's range (8 x 65504, the f16 scale's)");
    // A scale below FLT_MIN would make 1 / d overflow: such blocks store zeros.
    const float d = max / -8.f, id = std::abs(d) >= std::numeric_limits<float>::min() ? 1.f / d : 0.f;
    const uint16_t h = f32_to_f16(d);
    std::memcpy(out, &h, 2);
    // x * id lies in [-8, 8], so x * id + 8.5 in [0.5, 16.5]: the truncation is defined.
    for (int j = 0; j < 16; ++j) {
      const int lo = std::min(15, int(xb[j] * id + 8.5f)), hi = std::min(15, int(xb[j + 16] * id + 8.5f));
      out[2 + j] = uint8_t(lo | (hi << 4));
    }
  }
}

}  // namespace

WeightMatrix WeightMatrix::from_bytes(WeightFormat format, int out, int in, const void* bytes) {
  WeightMatrix m;
  m.out = out, m.in = in, m.format = format;
  // Copied in, not zero-filled first (a resize before the copy wrote every
  // byte twice).
  const auto* first = static_cast<const uint8_t*>(bytes);
  m.data.assign(first, first + size_t(out) * m.row_bytes());
  return m;
}

WeightMatrix WeightMatrix::zeros(WeightFormat format, int out, int in) {
  if (!weight_format_fits(format, in))
    throw InputError("a row of " + std::to_string(in) + " values cannot be stored as " + weight_format_name(format) +
                     " (its blocks hold " + std::to_string(weight_block_values(format)) + ")");
  WeightMatrix m;
  m.out = out, m.in = in, m.format = format;
  m.data.resize(size_t(out) * m.row_bytes());
  return m;
}

void WeightMatrix::set_rows_f32(int r0, int rows, const float* values) {
  if (r0 < grouped_rows) throw Error("WeightMatrix::set_rows_f32: rows already in groups of 16");
  for (int r = 0; r < rows; ++r) {
    const float* x = values + size_t(r) * size_t(in);
    uint8_t* dst = data.data() + size_t(r0 + r) * row_bytes();
    switch (format) {
      case WeightFormat::Q8_0: quantize_row_q8_0(x, in, dst); break;
      case WeightFormat::Q4_0: quantize_row_q4_0(x, in, dst); break;
      case WeightFormat::Q4_K: quantize_ggml_blocks(GgmlBlocks::Q4_K, x, dst, in); break;
      case WeightFormat::Q5_K: quantize_ggml_blocks(GgmlBlocks::Q5_K, x, dst, in); break;
      case WeightFormat::Q6_K: quantize_ggml_blocks(GgmlBlocks::Q6_K, x, dst, in); break;
      case WeightFormat::F32: std::memcpy(dst, x, size_t(in) * 4); break;
      case WeightFormat::BF16:
      case WeightFormat::F16:
        for (int k = 0; k < in; ++k) {
          // Past f16's largest value a weight would be stored as Inf.
          if (format == WeightFormat::F16 && !(std::abs(x[k]) <= 65504.f))
            throw InputError("a weight of " + std::to_string(x[k]) + " is beyond F16's range (65504)");
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

namespace {
// Where row i's block b lies in its group (simd/row_groups.h): its scale,
// and chunk c's four bytes of values.
struct GroupedBlocks {
  size_t block_bytes;  // one row's block: 18 (Q4_0) or 34 (Q8_0)
  int chunks() const { return int(block_bytes - 2) / 4; }
  size_t scale_at(int b, int i) const { return size_t(b) * simd::kGroupRows * block_bytes + size_t(2 * i); }
  size_t chunk_at(int b, int i, int c) const { return size_t(b) * simd::kGroupRows * block_bytes + size_t(32 + 64 * c + 4 * i); }
  // Q8_0's values are grouped as w + 128 (row_groups.h): the same xor
  // each way.
  void move_chunk(uint8_t* dst, const uint8_t* src) const {
    std::memcpy(dst, src, 4);
    if (block_bytes == 34)
      for (int k = 0; k < 4; ++k) dst[k] ^= 0x80;
  }
};

// Where the bytes of row i's super-block b (as llama.cpp stores it) lie in
// a K-quant group (simd/row_groups.h): move(at in the group, at in the
// block, bytes) for each piece. Q4_K: d, dmin, each of the 12 packed scale
// bytes, each of the 32 chunks of 4 qs bytes; Q5_K the same and its 8 qh
// chunks. Q6_K: d, each block's two scales, the 32 ql and 16 qh chunks.
template <class Move>
void k_quant_block_pieces(WeightFormat format, int b, int i, Move move) {
  if (format == WeightFormat::Q4_K || format == WeightFormat::Q5_K) {
    const bool five = format == WeightFormat::Q5_K;
    const size_t g = size_t(b) * size_t(five ? simd::kQ5KGroupBlockBytes : simd::kQ4KGroupBlockBytes);
    const size_t qs = five ? 48 : 16;
    move(g + size_t(2 * i), 0, 2);
    move(g + size_t(32 + 2 * i), 2, 2);
    for (int k = 0; k < 12; ++k) move(g + size_t(64 + 16 * k + i), size_t(4 + k), 1);
    for (int c = 0; c < 32; ++c) move(g + size_t(256 + 64 * c + 4 * i), qs + size_t(4 * c), 4);
    if (five)
      for (int c = 0; c < 8; ++c) move(g + size_t(2304 + 64 * c + 4 * i), size_t(16 + 4 * c), 4);
    return;
  }
  const size_t g = size_t(b) * simd::kQ6KGroupBlockBytes;
  move(g + size_t(2 * i), 208, 2);
  for (int m = 0; m < 8; ++m) move(g + size_t(32 + 32 * m + 2 * i), size_t(192 + 2 * m), 2);
  for (int c = 0; c < 32; ++c) move(g + size_t(288 + 64 * c + 4 * i), size_t(4 * c), 4);
  for (int c = 0; c < 16; ++c) move(g + size_t(2336 + 64 * c + 4 * i), size_t(128 + 4 * c), 4);
}
bool is_k_quant(WeightFormat f) { return weight_block_values(f) == 256; }
}  // namespace

void WeightMatrix::copy_row(int o, uint8_t* dst) const {
  if (o >= grouped_rows) {
    std::memcpy(dst, row(o), row_bytes());
    return;
  }
  const uint8_t* g = group(o / simd::kGroupRows);
  const int i = o % simd::kGroupRows;
  if (is_k_quant(format)) {
    const size_t block_bytes = weight_row_bytes(format, 256);
    for (int b = 0; b < in / 256; ++b)
      k_quant_block_pieces(format, b, i, [&](size_t at, size_t from, size_t n) { std::memcpy(dst + size_t(b) * block_bytes + from, g + at, n); });
    return;
  }
  const GroupedBlocks at{weight_row_bytes(format, 32)};
  for (int b = 0; b < in / 32; ++b, dst += at.block_bytes) {
    std::memcpy(dst, g + at.scale_at(b, i), 2);
    for (int c = 0; c < at.chunks(); ++c) at.move_chunk(dst + 2 + 4 * c, g + at.chunk_at(b, i, c));
  }
}

void WeightMatrix::group_rows() {
  if (!weight_format_is_blocked(format) || !int8_activations || grouped_rows > 0) return;
  const GroupedBlocks at{weight_row_bytes(format, 32)};
  const int whole = out / simd::kGroupRows * simd::kGroupRows;
  const size_t bytes = simd::kGroupRows * row_bytes();
  std::vector<uint8_t> rows(bytes);
  for (int g = 0; g < whole / simd::kGroupRows; ++g) {
    uint8_t* dst = data.data() + size_t(g) * bytes;
    std::memcpy(rows.data(), dst, bytes);
    for (int i = 0; i < simd::kGroupRows; ++i) {
      const uint8_t* src = rows.data() + size_t(i) * row_bytes();
      if (is_k_quant(format)) {
        const size_t block_bytes = weight_row_bytes(format, 256);
        for (int b = 0; b < in / 256; ++b)
          k_quant_block_pieces(format, b, i, [&](size_t at, size_t from, size_t n) { std::memcpy(dst + at, src + size_t(b) * block_bytes + from, n); });
        continue;
      }
      for (int b = 0; b < in / 32; ++b, src += at.block_bytes) {
        std::memcpy(dst + at.scale_at(b, i), src, 2);
        for (int c = 0; c < at.chunks(); ++c) at.move_chunk(dst + at.chunk_at(b, i, c), src + 2 + 4 * c);
      }
    }
  }
  grouped_rows = whole;
}

void WeightMatrix::row_f32(int o, float* dst) const {
  if (o >= grouped_rows) return row_kernels(format).to_f32(simd::best(), row(o), in, dst);
  thread_local std::vector<uint8_t> bytes;
  bytes.resize(row_bytes());
  copy_row(o, bytes.data());
  row_kernels(format).to_f32(simd::best(), bytes.data(), in, dst);
}

}  // namespace splitdec
