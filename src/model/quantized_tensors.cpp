#include "model/quantized_tensors.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "io/safetensors.h"

namespace splitdec {

namespace {
// Bytes of one block's values (the block minus its 2-byte scale).
size_t block_value_bytes(WeightFormat f) { return weight_row_bytes(f, 32) - 2; }
}  // namespace

std::string quantized_scale_name(const std::string& name) { return name + "_scale"; }

DType quantized_values_dtype(WeightFormat format) { return format == WeightFormat::Q4_0 ? DType::U8 : DType::I8; }

std::vector<int64_t> quantized_values_shape(WeightFormat format, int64_t out, int64_t in) {
  return {out, format == WeightFormat::Q4_0 ? in / 2 : in};
}

WeightFormat quantized_format_of(DType dtype) { return dtype == DType::U8 ? WeightFormat::Q4_0 : WeightFormat::Q8_0; }

void split_quantized_rows(const WeightMatrix& m, int r0, int rows, uint8_t* values, uint16_t* scales) {
  const size_t nb = size_t(m.in / 32), vb = block_value_bytes(m.format);
  for (int r = 0; r < rows; ++r) {
    const uint8_t* src = m.row(r0 + r);
    for (size_t b = 0; b < nb; ++b, src += vb + 2) {
      std::memcpy(scales++, src, 2);
      std::memcpy(values, src + 2, vb);
      values += vb;
    }
  }
}

void check_q8_0_values(const uint8_t* blocks, size_t block_count, const std::string& what) {
  for (size_t b = 0; b < block_count; ++b)
    if (const void* bad = std::memchr(blocks + b * 34 + 2, 0x80, 32))
      throw FormatError(what + " holds -128 at element " +
                        std::to_string(b * 32 + size_t(static_cast<const uint8_t*>(bad) - (blocks + b * 34 + 2))) +
                        ", outside Q8_0's -127 .. 127");
}

void check_k_quant_factors(WeightFormat format, const uint8_t* blocks, size_t block_count, const std::string& what) {
  struct Factor {
    size_t at;
    const char* name;
  };
  const bool with_min = format != WeightFormat::Q6_K;  // Q4_K, Q5_K: d and dmin first
  const size_t block_bytes = weight_row_bytes(format, 256);
  const std::vector<Factor> factors = with_min ? std::vector<Factor>{{0, "d"}, {2, "dmin"}} : std::vector<Factor>{{208, "d"}};
  for (size_t b = 0; b < block_count; ++b)
    for (const Factor& f : factors) {
      uint16_t h;
      std::memcpy(&h, blocks + b * block_bytes + f.at, 2);
      if ((h & 0x7c00) == 0x7c00)  // exponent all ones: Inf or NaN
        throw FormatError(what + ": super-block " + std::to_string(b) + " has its " + f.name + " Inf or NaN");
    }
}

WeightMatrix load_quantized_matrix(const TensorStore& store, const TensorView& values, int out, int in) {
  const WeightFormat format = quantized_format_of(values.dtype);
  const std::string what = values.file + ": tensor '" + values.name + "' (" + dtype_name(values.dtype) + ", " +
                           weight_format_name(format) + " block values)";
  if (in % 32 != 0)
    throw FormatError(what + ": a row of " + std::to_string(in) + " weights is not whole blocks of 32");
  const std::vector<int64_t> want = quantized_values_shape(format, out, in);
  if (values.shape != want)
    throw FormatError(what + " has shape " + shape_text(values.shape) + ", expected " + shape_text(want) + " for [" +
                      std::to_string(out) + ", " + std::to_string(in) + "] weights");
  const std::string scale_name = quantized_scale_name(values.name);
  const TensorView* scales = store.find(scale_name);
  if (!scales) throw FormatError(what + ": its scales '" + scale_name + "' are missing");
  const std::vector<int64_t> want_scales{out, in / 32};
  if (scales->dtype != DType::F16 || scales->shape != want_scales)
    throw FormatError(scales->file + ": tensor '" + scale_name + "' is " + dtype_name(scales->dtype) + " " +
                      shape_text(scales->shape) + ", expected F16 " + shape_text(want_scales) +
                      " (one scale per block of 32 weights of '" + values.name + "')");
  // Scales are f16 bits: a NaN or Inf one would poison every output it touches.
  if (const int64_t bad = scales->first_non_finite(); bad >= 0)
    throw FormatError(scales->file + ": tensor '" + scale_name + "' holds a non-finite scale at element " + std::to_string(bad));
  WeightMatrix m = WeightMatrix::zeros(format, out, in);
  const size_t nb = size_t(in / 32), vb = block_value_bytes(format), row_values = nb * vb;
  constexpr int kRows = 4096;  // rows joined per piece, then the file's pages of them dropped
  for (int r0 = 0; r0 < out; r0 += kRows) {
    const int rows = std::min(kRows, out - r0);
    for (int r = r0; r < r0 + rows; ++r) {
      uint8_t* dst = m.data.data() + size_t(r) * m.row_bytes();
      const uint8_t* v = values.data + size_t(r) * row_values;
      const uint8_t* s = scales->data + size_t(r) * nb * 2;
      // Q8_0 values are -127 .. 127 (llama.cpp's quantizer never writes
      // -128); the integer kernels take |x| and a sign, for which -128 has no
      // int8 negation.
      if (format == WeightFormat::Q8_0)
        if (const void* bad = std::memchr(v, 0x80, row_values))
          throw FormatError(what + " holds -128 at element " +
                            std::to_string(size_t(r) * row_values + size_t(static_cast<const uint8_t*>(bad) - v)) +
                            ", outside Q8_0's -127 .. 127");
      for (size_t b = 0; b < nb; ++b, dst += vb + 2) {
        std::memcpy(dst, s + 2 * b, 2);
        std::memcpy(dst + 2, v + b * vb, vb);
      }
    }
    TensorView piece = values;
    piece.data = values.data + size_t(r0) * row_values;
    piece.nbytes = size_t(rows) * row_values;
    store.release(piece);
  }
  store.release(*scales);
  return m;
}

}  // namespace splitdec
