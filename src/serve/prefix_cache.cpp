#include "serve/prefix_cache.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "pipeline/session.h"

namespace splitdec::serve {

namespace {

// Position `at` continues the block of position at - 1 (a cut there would split it).
bool inside_block(const std::vector<int>& ids, int64_t at) {
  return at > 0 && size_t(at) < ids.size() && ids[size_t(at)] >= 0 && ids[size_t(at)] == ids[size_t(at - 1)];
}

bool starts_block(const std::vector<int>& ids, size_t at) {
  return ids[at] >= 0 && (at == 0 || ids[at] != ids[at - 1]);
}

size_t media_hidden(const PromptBatch& p) {
  const int64_t positions = p.media_positions();
  return positions > 0 && !p.media.empty() ? p.media.size() / size_t(positions) : 0;
}

}  // namespace

PrefixCache::PrefixCache(int slots) : held_(size_t(std::max(slots, 0))) {}

int64_t PrefixCache::shared_prefix(int slot, const PromptBatch& prompt) const {
  const Held& h = held_.at(size_t(slot));
  if (h.last_used == 0 || prompt.batch != 1) return 0;
  // A padded prompt starts its positions elsewhere: never reused.
  if (std::find(prompt.attention_mask.begin(), prompt.attention_mask.end(), 0) != prompt.attention_mask.end()) return 0;
  const std::vector<int> blocks = prompt.sequence_block_ids(0);
  const size_t hidden = media_hidden(prompt);
  const size_t n = std::min(h.tokens.size(), size_t(prompt.seq));
  size_t media_row = 0, at = 0;
  for (; at < n; ++at) {
    if (h.tokens[at] != prompt.tokens[at] || h.modality[at] != prompt.modality[at]) break;
    if ((h.block_ids[at] >= 0) != (blocks[at] >= 0) || starts_block(h.block_ids, at) != starts_block(blocks, at)) break;
    if (prompt.modality[at] == Modality::Text) continue;
    // A media position: the rows it was embedded from, byte for byte (or both from the token embedding).
    if (h.has_media_rows != (hidden > 0)) break;
    if (hidden > 0) {
      const size_t bytes = hidden * sizeof(float);
      if (h.media.size() < (media_row + 1) * hidden ||
          std::memcmp(h.media.data() + media_row * hidden, prompt.media.data() + media_row * hidden, bytes) != 0)
        break;
    }
    ++media_row;
  }
  return int64_t(at);
}

PrefixCache::Reuse PrefixCache::choose(const PromptBatch& prompt, const Session& session) const {
  const std::vector<int> blocks = prompt.sequence_block_ids(0);
  Reuse best;
  uint64_t best_used = 0;
  int empty = -1;  // a free slot that holds nothing
  for (int slot = 0; slot < int(held_.size()); ++slot) {
    if (session.live(slot)) continue;
    const Held& h = held_[size_t(slot)];
    if (h.last_used == 0 && empty < 0) empty = slot;
    // At least the prompt's last position is fed: its logits choose the first token.
    int64_t cached = std::min<int64_t>(shared_prefix(slot, prompt), int64_t(prompt.seq) - 1);
    // Never inside a media block: back to its start (the block is recomputed).
    while (cached > 0 && (inside_block(blocks, cached) || inside_block(h.block_ids, cached))) {
      const std::vector<int>& ids = inside_block(blocks, cached) ? blocks : h.block_ids;
      const int id = ids[size_t(cached)];
      while (cached > 0 && ids[size_t(cached - 1)] == id) --cached;
    }
    // A ring that no longer holds the window before the cut refuses it; an
    // earlier cut needs older positions still, so the slot starts over.
    if (cached > 0 && !session.can_rewind(slot, cached)) cached = 0;
    const bool better = best.slot < 0 || cached > best.cached || (cached == best.cached && h.last_used < best_used);
    if (better) best = {slot, cached}, best_used = h.last_used;
  }
  if (best.slot < 0) throw CapacityError("the prefix cache found no free KV slot");
  // A match of less than half the prompt a slot holds (every chat shares its
  // template's first tokens) does not evict another conversation while an
  // empty slot is free.
  if (empty >= 0 && best.cached * 2 < held_[size_t(best.slot)].prompt_length) return {empty, 0};
  return best;
}

void PrefixCache::remember(int slot, const PromptBatch& prompt, const std::vector<int>& generated, int64_t length) {
  Held& h = held_.at(size_t(slot));
  const int64_t total = int64_t(prompt.seq) + int64_t(generated.size());
  if (prompt.batch != 1 || length <= 0 || length > total) {
    forget(slot);
    return;
  }
  h.tokens.assign(prompt.tokens.begin(), prompt.tokens.end());
  h.tokens.insert(h.tokens.end(), generated.begin(), generated.end());
  h.modality.assign(prompt.modality.begin(), prompt.modality.end());
  h.modality.resize(size_t(total), Modality::Text);
  h.block_ids = prompt.sequence_block_ids(0);
  h.block_ids.resize(size_t(total), -1);
  h.tokens.resize(size_t(length));
  h.modality.resize(size_t(length));
  h.block_ids.resize(size_t(length));
  const size_t hidden = media_hidden(prompt);
  h.has_media_rows = hidden > 0;
  const auto media_held = std::count_if(h.modality.begin(), h.modality.end(), [](Modality m) { return m != Modality::Text; });
  if (hidden > 0) h.media.assign(prompt.media.begin(), prompt.media.begin() + long(size_t(media_held) * hidden));
  else h.media.clear();
  h.prompt_length = std::min<int64_t>(prompt.seq, length);
  h.last_used = ++clock_;
}

void PrefixCache::forget(int slot) { held_.at(size_t(slot)) = Held{}; }

}  // namespace splitdec::serve
