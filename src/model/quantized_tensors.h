// How block-quantized matrices sit in a safetensors file (`splitdec
// quantize` writes them, the loader reads them). A matrix `NAME` of [out,
// in] weights stored as Q8_0 or Q4_0 (kernels/weight_matrix.h) is two
// tensors:
//   NAME         the block values: Q8_0 I8 [out, in], value k of a row is
//                weight k's int8; Q4_0 U8 [out, in / 2], each row 32-weight
//                block after block, 16 bytes a block as Q4_0 packs them
//                (weight j in byte j's low nibble, j + 16 in its high one,
//                both + 8);
//   NAME_scale   F16 [out, in / 32], block b's scale d (weight = d * value,
//                Q4_0: d * (nibble - 8)).
// So a llama.cpp Q8_0 / Q4_0 tensor maps onto it byte for byte (only the
// scales move to their own tensor), and any safetensors reader sees
// ordinary int8 values and f16 scales.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "kernels/weight_matrix.h"

namespace splitdec {

class TensorStore;
struct TensorView;

std::string quantized_scale_name(const std::string& name);
// The values tensor's dtype and shape for a block format.
DType quantized_values_dtype(WeightFormat format);
std::vector<int64_t> quantized_values_shape(WeightFormat format, int64_t out, int64_t in);
// The block format a values tensor of `dtype` holds (I8: Q8_0, U8: Q4_0).
WeightFormat quantized_format_of(DType dtype);

// `rows` stored rows of `m` (from row r0) split into the values and scales
// of those rows, in the layout above.
void split_quantized_rows(const WeightMatrix& m, int r0, int rows, uint8_t* values, uint16_t* scales);

// The [out, in] matrix stored as `values` and its scale tensor in `store`,
// read piece by piece (the file's pages dropped as it goes). FormatError
// naming the tensor for a missing scale tensor, a wrong shape or dtype, or a
// row length that is not whole blocks.
WeightMatrix load_quantized_matrix(const TensorStore& store, const TensorView& values, int out, int in);

// Q8_0 blocks as stored ({f16 d, int8 q[32]} x blocks) whose values are all
// -127 .. 127 (llama.cpp's quantizer never writes -128; the integer kernels
// take |w| and a sign, for which -128 has no int8 negation). FormatError
// naming `what` and the element otherwise.
void check_q8_0_values(const uint8_t* blocks, size_t block_count, const std::string& what);

// K-quant super-blocks as stored (Q4_K, Q5_K or Q6_K) whose f16 factors
// (Q4_K's and Q5_K's d and dmin, Q6_K's d) are finite (an Inf or NaN
// factor would turn every value of the block to garbage). FormatError
// naming `what`, the super-block and the factor otherwise.
void check_k_quant_factors(WeightFormat format, const uint8_t* blocks, size_t block_count, const std::string& what);

}  // namespace splitdec
