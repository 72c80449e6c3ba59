#include "pipeline/chunker.h"

#include "core/error.h"

namespace splitdec {

std::vector<ChunkSpan> split_into_chunks(const std::vector<std::vector<int>>& block_ids, int chunk_size) {
  if (chunk_size <= 0) throw InputError("chunk size must be at least 1, got " + std::to_string(chunk_size));
  const int n = block_ids.empty() ? 0 : int(block_ids[0].size());
  auto cuts_block = [&](int end) {  // would a boundary before `end` split a block?
    for (const auto& ids : block_ids)
      if (ids[size_t(end - 1)] >= 0 && ids[size_t(end - 1)] == ids[size_t(end)]) return true;
    return false;
  };
  std::vector<ChunkSpan> chunks;
  for (int begin = 0; begin < n;) {
    int end = std::min(n, begin + chunk_size);
    while (end < n && cuts_block(end)) ++end;
    ChunkSpan c{begin, end, false};
    for (const auto& ids : block_ids)
      for (int k = begin; k < end && !c.media; ++k) c.media = ids[size_t(k)] >= 0;
    chunks.push_back(c);
    begin = end;
  }
  return chunks;
}

}  // namespace splitdec
