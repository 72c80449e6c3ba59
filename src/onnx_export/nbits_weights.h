// Q8_0 and Q4_0 matrices as ONNX Runtime's com.microsoft.MatMulNBits takes
// them, so an exported package keeps the weights' bytes per value instead of
// expanding them to f32 (a 4-bit gemma3-1b decoder: 0.7 GB instead of 4 GB).
//
// MatMulNBits(A, B, scales) computes A dequant(B)^T with, for output row n
// and block k of block_size values, value = (code - zero_point) * scale[n, k];
// codes are packed low bits first along K, and without a zero_points input
// the zero point is 2^(bits - 1). Both of splitdec's block formats are that
// form exactly, with block_size 32:
//   Q8_0 (bits 8): w = d * q, q int8    -> code = q + 128, scale = d;
//   Q4_0 (bits 4): w = d * (nibble - 8) -> code = nibble, scale = d;
// only the order of the nibbles differs (Q4_0 keeps value j and j + 16 in
// one byte, MatMulNBits values 2i and 2i + 1). The f16 scale d becomes an
// f32 scale (exact), so dequantizing gives splitdec's values bit for bit.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/weight_matrix.h"

namespace splitdec::onnx_export {

inline constexpr int kNbitsBlockSize = 32;

// Whether `w` is written as MatMulNBits codes (Q8_0, Q4_0); other formats
// (the float ones, the K-quants, whose per-sub-block minimum has no exact
// MatMulNBits form) are written as f32.
bool has_nbits_form(const WeightMatrix& w);
int nbits_bits(const WeightMatrix& w);  // 8 or 4
int64_t nbits_blocks(const WeightMatrix& w);  // blocks per row: in / 32
int64_t nbits_blob_bytes(const WeightMatrix& w);  // bytes per block: 32 * bits / 8

// B: [out, in / 32, blob bytes] codes.
std::vector<uint8_t> nbits_codes(const WeightMatrix& w);
// scales: [out, in / 32] f32.
std::vector<float> nbits_scales(const WeightMatrix& w);

// The reference: row o's values from B and scales as MatMulNBits dequantizes
// them (the tests compare it with WeightMatrix::row_f32).
void nbits_dequantize_row(const uint8_t* codes, const float* scales, int bits, int in, float* out);

}  // namespace splitdec::onnx_export
