// A GGUF tensor's ggml blocks (io's BlockType), read as values: the formats
// splitdec's kernels run as they are stored (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K)
// and the ones it only expands (Q4_1, Q5_0, Q5_1), for the loaders that
// take a row or a matrix of them (the decoder's weights, the per-layer
// table, the media towers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "io/ggml_block_formats.h"
#include "io/safetensors.h"
#include "kernels/weight_matrix.h"

namespace splitdec {

// The WeightFormat that holds `blocks` byte for byte, if splitdec has one.
std::optional<WeightFormat> weight_format_of_blocks(BlockType blocks);
// io/ggml_block_formats.h's name for `blocks` where it can expand them
// (Q4_1, Q5_0, Q5_1 and the K-quants); false for the others.
bool ggml_blocks_of(BlockType blocks, GgmlBlocks* format);
// Bytes of one row of `n` values (whole blocks, which the GGUF reader checked).
size_t block_row_bytes(BlockType blocks, int64_t n);
// `rows` rows of `n` values from their blocks into `dst` (rows * n floats),
// in place: no copy of the blocks (the per-layer table expands a row per token).
void expand_block_rows(BlockType blocks, const uint8_t* src, int64_t rows, int64_t n, float* dst);

}  // namespace splitdec
