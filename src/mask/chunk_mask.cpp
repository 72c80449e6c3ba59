#include "mask/chunk_mask.h"

#include <algorithm>
#include <limits>

namespace splitdec {

std::vector<KeyInterval> chunk_row_intervals(const LayerMaskRule& rule, const ChunkMaskInput& in) {
  std::vector<KeyInterval> out(size_t(in.batch) * size_t(in.rows));
  for (int b = 0; b < in.batch; ++b) {
    const std::vector<int>& blk = (*in.block_ids)[size_t(b)];
    const std::vector<KeyInterval> spans = block_spans(blk);
    for (int r = 0; r < in.rows; ++r) {
      const int id = blk[size_t(r)];
      const int64_t i = in.first + r;
      KeyInterval iv = id >= 0 ? visible_keys(rule, i, id, in.first + spans[size_t(id)].begin, in.first + spans[size_t(id)].end)
                               : visible_keys(rule, i, -1, 0, 0);
      iv.begin = std::max(iv.begin, in.seq_start[b]);  // left padding
      out[size_t(b) * size_t(in.rows) + size_t(r)] = iv;
    }
  }
  return out;
}

std::vector<float> chunk_dense_bias(const LayerMaskRule& rule, const ChunkMaskInput& in) {
  const int64_t total = in.first + in.rows;
  std::vector<float> bias(size_t(in.batch) * size_t(in.rows) * size_t(total));
  const float hidden = -std::numeric_limits<float>::infinity();
  for (int b = 0; b < in.batch; ++b) {
    const std::vector<int>& blk = (*in.block_ids)[size_t(b)];
    for (int r = 0; r < in.rows; ++r) {
      float* row = bias.data() + (size_t(b) * size_t(in.rows) + size_t(r)) * size_t(total);
      const int64_t i = in.first + r;
      for (int64_t j = 0; j < total; ++j) {
        // Past keys get block id -2: never equal to a chunk query's block.
        const int bj = j >= in.first ? blk[size_t(j - in.first)] : -2;
        const bool pad = j < in.seq_start[b];
        row[j] = visible(rule, i, j, blk[size_t(r)], bj, pad) ? 0.f : hidden;
      }
    }
  }
  return bias;
}

}  // namespace splitdec
