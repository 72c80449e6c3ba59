#include "pipeline/chunker.h"

#include <algorithm>

#include "core/error.h"

namespace splitdec {

std::vector<ChunkSpan> split_into_chunks(const std::vector<std::vector<int>>& block_ids, int chunk_size) {
  if (chunk_size <= 0) throw InputError("chunk size must be at least 1, got " + std::to_string(chunk_size));
  const int n = block_ids.empty() ? 0 : int(block_ids[0].size());
  auto block_start = [](const std::vector<int>& ids, int k) {
    while (k > 0 && ids[size_t(k - 1)] == ids[size_t(k)]) --k;
    return k;
  };
  auto block_end = [n](const std::vector<int>& ids, int k) {
    while (k + 1 < n && ids[size_t(k + 1)] == ids[size_t(k)]) ++k;
    return k + 1;
  };
  std::vector<ChunkSpan> chunks;
  for (int begin = 0; begin < n;) {
    // A block that starts the chunk must be whole in it, even when longer
    // than chunk_size; a block that would be cut later starts the next chunk.
    int forced = begin + 1;
    for (const auto& ids : block_ids)
      if (ids[size_t(begin)] >= 0) forced = std::max(forced, block_end(ids, begin));
    int end = std::max(std::min(n, begin + chunk_size), forced);
    for (bool cut = true; cut;) {
      cut = false;
      for (const auto& ids : block_ids) {
        if (end >= n || ids[size_t(end - 1)] < 0 || ids[size_t(end - 1)] != ids[size_t(end)]) continue;
        const int bs = block_start(ids, end - 1);
        if (bs > begin && bs >= forced) {
          end = bs;
        } else {
          end = block_end(ids, end - 1);
          forced = std::max(forced, end);
        }
        cut = true;
        break;
      }
    }
    ChunkSpan c{begin, end, false};
    for (const auto& ids : block_ids)
      for (int k = begin; k < end && !c.media; ++k) c.media = ids[size_t(k)] >= 0;
    chunks.push_back(c);
    begin = end;
  }
  return chunks;
}

}  // namespace splitdec
