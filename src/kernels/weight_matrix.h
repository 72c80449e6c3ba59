// Weight storage: one byte buffer, a format tag and a shape, for every
// matrix the linear layers read. Matrices keep the checkpoint's format in
// memory (bf16 / f16 halve the bytes a decode step reads) and are expanded
// to f32 inside the kernels. The kernels for a format are picked in one
// place, row_kernels() (kernels/row_kernels.h); a new format
// (block-quantized int8 or 4-bit) is a tag here, its row size, and its
// kernels there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/aligned_vector.h"
#include "core/dtype.h"

namespace splitdec {

// Q8_0: each row is in / 32 blocks of 34 bytes, {f16 scale d, int8 q[32]},
// w = d * q; byte for byte llama.cpp's block_q8_0, so its Q8_0 tensors map
// onto it without requantizing.
// Q4_0: each row is in / 32 blocks of 18 bytes, {f16 scale d, uint8
// qs[16]}; value j of a block is the low nibble of qs[j] and value j + 16
// the high one, w = d * (nibble - 8): byte for byte llama.cpp's block_q4_0.
// Both take only rows whose length is a multiple of 32.
// Q4_K: each row is in / 256 super-blocks of 144 bytes, {f16 d, f16 dmin,
// 12 bytes packing eight 6-bit scales sc and mins m, uint8 qs[128]}; value
// 32 j + t of a super-block is d sc_j q - dmin m_j with q the low nibble of
// qs[32 (j / 2) + t] for even j, the high one for odd j: byte for byte
// llama.cpp's block_q4_K (a GGUF's Q4_K_M tensors run as they are). Rows
// whose length is a multiple of 256.
// Q5_K: Q4_K with a fifth bit per value: 176-byte super-blocks {f16 d, f16
// dmin, 12 packed scale bytes, uint8 qh[32], uint8 qs[128]}, value 32 j + t
// is d sc_j (q + 16 ((qh[t] >> j) & 1)) - dmin m_j: llama.cpp's block_q5_K.
// Q6_K: each row is in / 256 super-blocks of 210 bytes, {uint8 ql[128],
// uint8 qh[64], int8 sc[16], f16 d}; value 128 h + 32 k + l of a
// super-block (half h < 2, quarter k < 4, l < 32) is d sc_(8h + 2k + l/16)
// (q - 32), q's low 4 bits the low (k < 2) or high nibble of
// ql[64 h + 32 (k % 2) + l] and its high 2 bits (qh[32 h + l] >> 2k) & 3:
// byte for byte llama.cpp's block_q6_K (a Q4_K_M file's embedding and some
// attn_v / ffn_down). Rows whose length is a multiple of 256.
enum class WeightFormat : uint8_t { F32, BF16, F16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K };

const char* weight_format_name(WeightFormat f);
// The format that holds a float checkpoint dtype as it is (Error for I8 /
// U8, which hold block values apart from their scales).
WeightFormat weight_format_of(DType t);
// Whether `f` stores blocks of integers with scales (Q8_0, Q4_0, the K-quants),
// which take int8 activations and row groups.
bool weight_format_is_blocked(WeightFormat f);
// Values per block of `f` (32, 256 for the K-quants; 1 for the float formats).
int weight_block_values(WeightFormat f);
// Bytes of one row of `in` elements (Q8_0: in / 32 blocks of 34 bytes).
size_t weight_row_bytes(WeightFormat f, int in);
// Whether rows of `in` elements can be stored as `f` (whole blocks).
bool weight_format_fits(WeightFormat f, int in);

// [out, in] in the nn.Linear layout, rows stored one after another.
struct WeightMatrix {
  int out = 0, in = 0;
  WeightFormat format = WeightFormat::F32;
  HugePageVector<uint8_t> data;  // 64-byte aligned, so are rows of a multiple of 64 bytes
  // Block formats only: each activation row is quantized to Q8_0 blocks
  // too (Q8_K, a scale per 256 values, for the K-quants). Decode steps then
  // take integer block dot products (llama.cpp's q8_0 x q8_0, q4_0 x q8_0,
  // q4_K x q8_K ...), and so does prefill on grouped rows;
  // a prefill GEMM (ungrouped rows: f32, or bf16 products where on) runs on
  // those quantized activations expanded back, so both see the same inputs.
  // Otherwise activations stay f32.
  bool int8_activations = false;
  // Block formats with int8 activations only: rows [0, grouped_rows) are
  // stored in groups of 16, the rest one after another as usual. A group
  // holds the same bytes as its 16 rows, rearranged so that a decode step
  // reads 16 rows' blocks in one stream and meets them with one broadcast
  // activation (simd/row_groups.h has the layout; llama.cpp repacks its
  // Q4_0 the same way). Set by group_rows(); the file format is unchanged.
  int grouped_rows = 0;

  // `out` rows already in `format` (a checkpoint tensor's bytes).
  static WeightMatrix from_bytes(WeightFormat format, int out, int in, const void* bytes);
  // f32 values rounded to `format` (round to nearest even; Q8_0 as
  // llama.cpp's quantize_row_q8_0: d = max |x| / 127 of the block, q =
  // round(x / d), d stored as f16; Q4_0 as quantize_row_q4_0_ref: d = the
  // block's value of largest magnitude / -8, nibble = min(15, trunc(x / d +
  // 8.5)); the K-quants with plain min/max scales, io/ggml_block_formats.h). InputError
  // if the rows do not fit.
  static WeightMatrix from_f32(WeightFormat format, int out, int in, const float* values);

  // `out` zero rows, to be filled with set_rows_f32 (a loader that converts
  // a checkpoint a few rows at a time).
  static WeightMatrix zeros(WeightFormat format, int out, int in);
  // Rows [r0, r0 + rows) from f32 values, rounded as from_f32 does.
  void set_rows_f32(int r0, int rows, const float* values);

  bool empty() const { return out == 0; }
  size_t bytes() const { return data.size(); }
  size_t row_bytes() const { return weight_row_bytes(format, in); }
  // Row o as stored; only for rows at or past grouped_rows (else copy_row).
  const uint8_t* row(int o) const { return data.data() + size_t(o) * row_bytes(); }
  // Row o's bytes in the usual row layout, grouped or not.
  void copy_row(int o, uint8_t* dst) const;
  // Row o expanded exactly to f32 (embedding lookup, export), grouped or not.
  void row_f32(int o, float* dst) const;
  // Group g of the grouped rows (rows 16 g .. 16 g + 15).
  const uint8_t* group(int g) const { return data.data() + size_t(g) * 16 * row_bytes(); }
  // Q4_0 / Q8_0 / K-quant rows rearranged into groups of 16 (all whole
  // groups); a no-op on other formats or without int8 activations.
  void group_rows();
};

}  // namespace splitdec
