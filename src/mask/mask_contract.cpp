#include "mask/mask_contract.h"

#include <algorithm>

#include "core/error.h"
#include "core/named_values.h"

namespace splitdec {

namespace {
constexpr NamedValue<MaskPolicy> kPolicies[] = {
    {MaskPolicy::Gemma3, "gemma3"},
    {MaskPolicy::Gemma4, "gemma4"},
    {MaskPolicy::AllLayers, "all-layers"},
    {MaskPolicy::LegacyWindow, "legacy-window"},
    {MaskPolicy::Gemma4LegacyWindow, "gemma4-legacy-window"},
    {MaskPolicy::Causal, "causal"},
};
}  // namespace

MaskPolicy parse_mask_policy(const std::string& name) { return parse_named(kPolicies, name, "mask policy"); }

const char* mask_policy_name(MaskPolicy p) { return name_of(kPolicies, p); }

const std::vector<MaskPolicy>& all_mask_policies() {
  static const std::vector<MaskPolicy> all = [] {
    std::vector<MaskPolicy> v;
    for (const auto& p : kPolicies) v.push_back(p.value);
    return v;
  }();
  return all;
}

Modality parse_modality(const std::string& name) {
  if (name == "text") return Modality::Text;
  if (name == "image") return Modality::Image;
  if (name == "video") return Modality::Video;
  if (name == "audio") return Modality::Audio;
  throw InputError("unknown modality '" + name + "' (valid: text, image, video, audio)");
}

const char* modality_name(Modality m) {
  switch (m) {
    case Modality::Text: return "text";
    case Modality::Image: return "image";
    case Modality::Video: return "video";
    case Modality::Audio: return "audio";
  }
  return "?";
}

LayerMaskRule layer_mask_rule(MaskPolicy policy, LayerType type, int window) {
  const bool sliding = type == LayerType::Sliding;
  LayerMaskRule r;
  r.window = sliding ? window : 0;
  switch (policy) {
    case MaskPolicy::Gemma3:
    case MaskPolicy::AllLayers:
      r.block = true;
      break;
    case MaskPolicy::Gemma4:
      r.block = sliding;
      break;
    case MaskPolicy::LegacyWindow:
      r.block = true;
      r.window_limits_block = false;
      break;
    case MaskPolicy::Gemma4LegacyWindow:
      r.block = sliding;
      r.window_limits_block = false;
      break;
    case MaskPolicy::Causal:
      r.block = false;
      break;
  }
  return r;
}

bool policy_has_bidirectional_layer(MaskPolicy policy) {
  for (LayerType t : {LayerType::Sliding, LayerType::Full})
    if (layer_mask_rule(policy, t, 1).block) return true;
  return false;
}

std::vector<int> block_ids_from_modality(const std::vector<Modality>& modality) {
  std::vector<int> ids(modality.size(), -1);
  int next = -1;
  for (size_t k = 0; k < modality.size(); ++k) {
    if (!is_vision(modality[k])) continue;
    if (k == 0 || !is_vision(modality[k - 1])) ++next;  // a new vision run starts
    ids[k] = next;
  }
  return ids;
}

void validate_block_ids(const std::vector<int>& block_ids) {
  std::vector<int64_t> last_seen;
  for (size_t k = 0; k < block_ids.size(); ++k) {
    const int id = block_ids[k];
    if (id < -1) throw InputError("block id " + std::to_string(id) + " at position " + std::to_string(k) + " is invalid (use -1 for none)");
    if (id < 0) continue;
    // A sequence of S positions holds at most S blocks: larger ids are refused
    // (and nothing is ever sized by them).
    if (size_t(id) >= block_ids.size())
      throw InputError("block id " + std::to_string(id) + " at position " + std::to_string(k) + " is not below the " +
                       std::to_string(block_ids.size()) + " positions of its sequence");
    if (size_t(id) >= last_seen.size()) last_seen.resize(size_t(id) + 1, -1);
    int64_t& prev = last_seen[size_t(id)];
    if (prev >= 0 && prev != int64_t(k) - 1)
      throw InputError("block id " + std::to_string(id) + " appears in two separate runs (positions " +
                       std::to_string(prev) + " and " + std::to_string(k) + "); a block must be contiguous");
    prev = int64_t(k);
  }
}

KeyInterval visible_keys(const LayerMaskRule& rule, int64_t i, int blk_i, int64_t block_begin, int64_t block_end) {
  const bool in_block = rule.block && blk_i >= 0;
  const int64_t lo_block = in_block ? block_begin : i;
  const int64_t hi = in_block ? std::max(i + 1, block_end) : i + 1;
  const int64_t win_lo = rule.window > 0 ? std::max<int64_t>(0, i - rule.window + 1) : 0;
  if (rule.window_limits_block) return {win_lo, hi};
  // block OR (causal AND window): both pieces contain i, so the union is one interval.
  return {std::min(lo_block, win_lo), hi};
}

std::vector<KeyInterval> block_spans(const std::vector<int>& block_ids) {
  std::vector<KeyInterval> spans;
  for (size_t k = 0; k < block_ids.size(); ++k) {
    const int id = block_ids[k];
    if (id < 0) continue;
    if (size_t(id) >= spans.size()) spans.resize(size_t(id) + 1, KeyInterval{-1, -1});
    KeyInterval& s = spans[size_t(id)];
    if (s.begin < 0) s.begin = int64_t(k);
    s.end = int64_t(k) + 1;
  }
  return spans;
}

}  // namespace splitdec
