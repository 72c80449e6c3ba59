// The server's prefix cache across requests, llama-server's slot prompt
// cache: a finished request's KV slot keeps its KV, and this remembers what
// the slot holds (the prompt's tokens, modalities, media blocks and media
// rows, then the generated tokens that were fed). A new request takes the
// free slot that shares the longest prefix with its prompt and prefills
// only the rest. The slots themselves bound it (--max-sequences): no memory
// beyond the KV the session already has, plus a copy of the media rows.
//
// Media are compared by their rows, byte for byte (a client can forge any
// non-cryptographic hash). A reuse never ends inside a media block (the
// block is reused whole or recomputed), leaves at least one prompt position
// to feed (its logits choose the first token), and only goes where the
// session can rewind (Session::can_rewind: a sliding ring that has wrapped
// past the window before the cut refuses it; the cache then starts over).
#pragma once

#include <cstdint>
#include <vector>

#include "model/prompt_batch.h"

namespace splitdec {
class Session;
}  // namespace splitdec

namespace splitdec::serve {

class PrefixCache {
 public:
  explicit PrefixCache(int slots);

  struct Reuse {
    int slot = -1;        // a free slot of the session
    int64_t cached = 0;   // its positions [0, cached) are the prompt's: rewind there, prefill the rest
  };
  // The free slot for a one-row `prompt`: the one whose content shares the
  // longest usable prefix with it (ties: the least recently used); none, or
  // a match of less than half the prompt that slot holds while an empty slot
  // is free: an empty slot, else the least recently used, with cached = 0.
  // CapacityError when no slot is free (the caller counted one).
  Reuse choose(const PromptBatch& prompt, const Session& session) const;
  // Slot `slot` now holds `prompt` then `generated`, cut at `length` (the
  // positions its KV holds); used now, for the LRU order.
  void remember(int slot, const PromptBatch& prompt, const std::vector<int>& generated, int64_t length);
  // What `slot` holds is unknown or gone: it is never reused.
  void forget(int slot);
  // Whether `slot` holds content a request could reuse.
  bool holds(int slot) const { return held_.at(size_t(slot)).last_used != 0; }

  // Positions of `held`'s content shared with `prompt` from the start
  // (tokens, modality, block boundaries and media rows all equal), before
  // the media-block and rewind rules. Exposed for tests.
  int64_t shared_prefix(int slot, const PromptBatch& prompt) const;

 private:
  struct Held {
    std::vector<int> tokens;
    std::vector<Modality> modality;
    std::vector<int> block_ids;  // -1: text
    std::vector<float> media;    // rows of the media positions, in order
    bool has_media_rows = false;
    int64_t prompt_length = 0;  // positions of it that were the prompt (the rest: the reply)
    uint64_t last_used = 0;  // 0: never held anything
  };
  std::vector<Held> held_;
  uint64_t clock_ = 0;
};

}  // namespace splitdec::serve
