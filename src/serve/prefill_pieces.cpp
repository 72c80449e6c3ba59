#include "serve/prefill_pieces.h"

#include <algorithm>

#include "pipeline/chunker.h"

namespace splitdec::serve {

std::vector<std::pair<int, int>> prefill_pieces(const PromptBatch& p, int budget) {
  // The session's own cutter (one rule for a block that must stay whole), on this prompt's one row.
  std::vector<std::pair<int, int>> out;
  for (const ChunkSpan& c : split_into_chunks({p.sequence_block_ids(0)}, std::max(1, budget))) out.emplace_back(c.begin, c.end);
  return out;
}


}  // namespace splitdec::serve
