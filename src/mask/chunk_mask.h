// A chunk's mask in the two forms the attention paths take, both derived
// from the contract in mask_contract.h: per-row key intervals (O(S)) and, for
// the dense-bias baseline only, a float bias [batch, rows, total].
#pragma once

#include <cstdint>
#include <vector>

#include "mask/mask_contract.h"

namespace splitdec {

// A chunk of queries at positions [first, first + rows) for each sequence of
// a batch. Chunks never split a media block, so past keys (positions before
// `first`) never share a block with a query of the chunk.
struct ChunkMaskInput {
  int64_t first = 0;
  int rows = 0;
  int batch = 0;
  const std::vector<std::vector<int>>* block_ids = nullptr;  // per sequence, `rows` chunk-local ids (-1: none)
  const int64_t* seq_start = nullptr;                        // per sequence: first non-padding position
};

std::vector<KeyInterval> chunk_row_intervals(const LayerMaskRule& rule, const ChunkMaskInput& in);

// 0 where visible(i, j), -inf elsewhere; total = first + rows keys.
std::vector<float> chunk_dense_bias(const LayerMaskRule& rule, const ChunkMaskInput& in);

}  // namespace splitdec
