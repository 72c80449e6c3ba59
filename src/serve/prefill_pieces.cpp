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

PromptBatch prompt_slice(const PromptBatch& p, int begin, int end) {
  if (begin == 0 && end == p.seq) return p;
  PromptBatch s;
  s.batch = 1;
  s.seq = end - begin;
  s.tokens.assign(p.tokens.begin() + begin, p.tokens.begin() + end);
  s.modality.assign(p.modality.begin() + begin, p.modality.begin() + end);
  s.attention_mask.assign(p.attention_mask.begin() + begin, p.attention_mask.begin() + end);
  if (!p.block_ids.empty()) s.block_ids.assign(p.block_ids.begin() + begin, p.block_ids.begin() + end);
  const int64_t media_positions = p.media_positions();
  if (!p.media.empty() && media_positions > 0) {
    const size_t hidden = p.media.size() / size_t(media_positions);
    const auto before = std::count_if(p.modality.begin(), p.modality.begin() + begin, [](Modality m) { return m != Modality::Text; });
    const auto inside = std::count_if(s.modality.begin(), s.modality.end(), [](Modality m) { return m != Modality::Text; });
    s.media.assign(p.media.begin() + long(size_t(before) * hidden), p.media.begin() + long(size_t(before + inside) * hidden));
  }
  return s;
}

}  // namespace splitdec::serve
