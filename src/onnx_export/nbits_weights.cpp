#include "onnx_export/nbits_weights.h"

#include <cstring>
#include <stdexcept>

#include "core/dtype.h"

namespace splitdec::onnx_export {

namespace {
// A stored block starts with its f16 scale (weight_matrix.h).
constexpr size_t kScaleBytes = 2;

void require_nbits(const WeightMatrix& w) {
  if (!has_nbits_form(w))
    throw std::logic_error(std::string("no MatMulNBits form for ") + weight_format_name(w.format) + " weights");
}
}  // namespace

bool has_nbits_form(const WeightMatrix& w) { return w.format == WeightFormat::Q8_0 || w.format == WeightFormat::Q4_0; }

int nbits_bits(const WeightMatrix& w) {
  require_nbits(w);
  return w.format == WeightFormat::Q8_0 ? 8 : 4;
}

int64_t nbits_blocks(const WeightMatrix& w) { return w.in / kNbitsBlockSize; }

int64_t nbits_blob_bytes(const WeightMatrix& w) { return kNbitsBlockSize * nbits_bits(w) / 8; }

namespace {
// Calls visit(row, block, scale bits, values) for every stored block of `w`
// in the plain row layout (grouped rows too); values: the block's 32 int8
// (Q8_0) or 16 nibble-pair bytes (Q4_0), after its f16 scale.
template <class Visit>
void for_each_block(const WeightMatrix& w, Visit visit) {
  const size_t stored_block = weight_row_bytes(w.format, kNbitsBlockSize);
  const int64_t blocks = nbits_blocks(w);
  std::vector<uint8_t> row(w.row_bytes());
  for (int o = 0; o < w.out; ++o) {
    w.copy_row(o, row.data());
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* block = row.data() + size_t(b) * stored_block;
      uint16_t d;
      std::memcpy(&d, block, sizeof d);
      visit(o, b, d, block + kScaleBytes);
    }
  }
}
}  // namespace

std::vector<uint8_t> nbits_codes(const WeightMatrix& w) {
  const bool q8 = nbits_bits(w) == 8;
  const int64_t blocks = nbits_blocks(w), blob = nbits_blob_bytes(w);
  std::vector<uint8_t> codes(size_t(w.out) * size_t(blocks * blob));
  for_each_block(w, [&](int o, int64_t b, uint16_t, const uint8_t* q) {
    uint8_t* dst = codes.data() + (size_t(o) * size_t(blocks) + size_t(b)) * size_t(blob);
    if (q8) {
      for (int j = 0; j < kNbitsBlockSize; ++j) dst[j] = uint8_t(q[j] ^ 0x80);  // int8 q -> q + 128
    } else {
      // Q4_0's value j is the low nibble of q[j % 16] for j < 16, the high one after.
      auto nibble = [q](int j) { return j < 16 ? q[j] & 0x0f : q[j - 16] >> 4; };
      for (int i = 0; i < kNbitsBlockSize / 2; ++i) dst[i] = uint8_t(nibble(2 * i) | nibble(2 * i + 1) << 4);
    }
  });
  return codes;
}

std::vector<float> nbits_scales(const WeightMatrix& w) {
  require_nbits(w);
  const int64_t blocks = nbits_blocks(w);
  std::vector<float> scales(size_t(w.out) * size_t(blocks));
  for_each_block(w, [&](int o, int64_t b, uint16_t d, const uint8_t*) {
    scales[size_t(o) * size_t(blocks) + size_t(b)] = f16_to_f32(d);
  });
  return scales;
}

void nbits_dequantize_row(const uint8_t* codes, const float* scales, int bits, int in, float* out) {
  const int zero_point = 1 << (bits - 1), per_byte = 8 / bits, mask = (1 << bits) - 1;
  for (int k = 0; k < in; ++k) {
    const int code = codes[k / per_byte] >> (bits * (k % per_byte)) & mask;
    out[k] = float(code - zero_point) * scales[k / kNbitsBlockSize];
  }
}

}  // namespace splitdec::onnx_export
