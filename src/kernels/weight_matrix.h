// Weight storage: one byte buffer, a format tag and a shape, for every
// matrix the linear layers read. Matrices keep the checkpoint's format in
// memory (bf16 / f16 halve the bytes a decode step reads) and are expanded
// to f32 inside the kernels. The kernels for a format are picked in one
// place, row_kernels() in linear.cpp; a new format (block-quantized int8 or
// 4-bit) is a tag here, its row size, and its kernels there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace splitdec {

enum class WeightFormat : uint8_t { F32, BF16, F16 };

const char* weight_format_name(WeightFormat f);
// The format that holds a checkpoint dtype as it is.
WeightFormat weight_format_of(DType t);
// Bytes of one row of `in` elements (a block format will round up to whole blocks).
size_t weight_row_bytes(WeightFormat f, int in);

// [out, in] in the nn.Linear layout, rows stored one after another.
struct WeightMatrix {
  int out = 0, in = 0;
  WeightFormat format = WeightFormat::F32;
  std::vector<uint8_t> data;

  // `out` rows already in `format` (a checkpoint tensor's bytes).
  static WeightMatrix from_bytes(WeightFormat format, int out, int in, const void* bytes);
  // f32 values rounded to `format` (round to nearest even).
  static WeightMatrix from_f32(WeightFormat format, int out, int in, const float* values);

  bool empty() const { return out == 0; }
  size_t bytes() const { return data.size(); }
  size_t row_bytes() const { return weight_row_bytes(format, in); }
  const uint8_t* row(int o) const { return data.data() + size_t(o) * row_bytes(); }
  // Row o expanded exactly to f32 (embedding lookup, export).
  void row_f32(int o, float* dst) const;
};

}  // namespace splitdec
