// The mask contract: which keys a query may see. This file is the single
// place where the rule is stated; every attention path derives its mask from
// these functions (docs/semantics.md explains the policies).
//
//   causal(i,j)  = j <= i
//   block(i,j)   = blk(i) >= 0 and blk(i) == blk(j), on layers where the policy enables it
//   window(i,j)  = j > i - W                      (sliding layers; W keys incl. the query)
//   pad(j)       = attention_mask[j] == 0
//   visible(i,j) = not pad(j) and (causal or block) and window      -- most policies
//   visible(i,j) = not pad(j) and (block or (causal and window))    -- legacy-window policies
//
// blk(i) is the media block of position i: a maximal run of vision (image or
// video) tokens, or -1 (block_ids_from_modality), or a caller-given id.
//
// A row with no visible key outputs zeros.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <vector>

#include "splitdec/modality.h"
#include "splitdec/options.h"  // MaskPolicy, its parser and names

namespace splitdec {

enum class LayerType : uint8_t { Sliding, Full };

const std::vector<MaskPolicy>& all_mask_policies();

Modality parse_modality(const std::string& name);  // "text" | "image" | "video" | "audio"
const char* modality_name(Modality m);

// How one layer combines the terms under a policy.
struct LayerMaskRule {
  bool block = false;               // the block term is active on this layer
  int window = 0;                   // 0: no window
  bool window_limits_block = true;  // false: block OR (causal AND window)
  // Ordered, so that a mask built for one rule can be kept and reused by every layer with that rule.
  friend auto operator<=>(const LayerMaskRule&, const LayerMaskRule&) = default;
};

LayerMaskRule layer_mask_rule(MaskPolicy policy, LayerType type, int window);

// True when some layer type under `policy` lets media blocks look ahead:
// the chunks that hold such a block need the masked path.
bool policy_has_bidirectional_layer(MaskPolicy policy);

// True for the modalities whose runs form bidirectional media blocks: image
// and video together ("vision"); text and audio are never bidirectional.
inline bool is_vision(Modality m) { return m == Modality::Image || m == Modality::Video; }

// Block ids from modality: each maximal run of vision tokens is its own
// block, numbered from 0; text and audio get -1. Image and video count
// together, as in Hugging Face's Gemma-4 mask (`is_vision = image | video`
// in `get_block_sequence_ids_for_mask`): an image run directly followed by
// a video run is ONE block. Real prompts wrap each image in BOI/EOI text
// markers, so consecutive images stay separate blocks.
std::vector<int> block_ids_from_modality(const std::vector<Modality>& modality);

// Checks caller-given block ids (-1 = none): each id must form one contiguous
// run, which keeps every row's visible keys a single interval.
void validate_block_ids(const std::vector<int>& block_ids);

// The statement of the contract for one (query i, key j) pair.
inline bool visible(const LayerMaskRule& rule, int64_t i, int64_t j, int blk_i, int blk_j, bool key_is_pad) {
  if (key_is_pad) return false;
  const bool causal = j <= i;
  const bool block = rule.block && blk_i >= 0 && blk_i == blk_j;
  const bool window = rule.window == 0 || j > i - rule.window;
  if (rule.window_limits_block) return (causal || block) && window;
  return block || (causal && window);
}

// Half-open key interval [begin, end).
struct KeyInterval {
  int64_t begin = 0;
  int64_t end = 0;
  bool empty() const { return end <= begin; }
};

// The keys row i may see, before padding, as one interval: causal and block
// both contain i, so their union is contiguous and the window clips it from
// below. `block_begin`/`block_end` is the span of i's block (ignored when
// i has none or the rule has no block term). Padding is applied per key.
KeyInterval visible_keys(const LayerMaskRule& rule, int64_t i, int blk_i, int64_t block_begin, int64_t block_end);

// Spans [begin, end) of every block id in a sequence, indexed by id.
std::vector<KeyInterval> block_spans(const std::vector<int>& block_ids);

}  // namespace splitdec
