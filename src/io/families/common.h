// The pieces every Gemma-style family parser shares: the decoder geometry
// and token fields, layer types, RoPE settings and the per-layer specs
// (with KV sharing resolved). A family parser calls them in order and adds
// its own fields and checks in between.
#pragma once

#include <string>
#include <vector>

#include "io/families/family.h"

namespace splitdec::family_common {

// Where the family's defaults differ (HF class defaults).
struct TextDefaults {
  int vocab_size;
  int num_layers;
  int sliding_window;
};

// Fields read by read_text_geometry that the family still needs.
struct TextGeometry {
  int intermediate_size = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int window = 0;
  std::vector<LayerType> types;  // per layer, from layer_types or sliding_window_pattern
};

// vocab, hidden, layers, heads, norm eps, special token ids, tied
// embeddings, activation, bias, window and layer types; with their checks.
TextGeometry read_text_geometry(const ConfigSource& s, const TextDefaults& defaults, ModelConfig& c);

struct RopeParams {
  std::string type = "default";
  double theta = 10000.0;
  double factor = 1.0;
  double partial_rotary_factor = 1.0;
};
// One RoPE dict (rope_scaling, or an entry of rope_parameters); `field` names it in errors.
RopeParams read_rope_dict(const ConfigFields& parent, const std::string& field, const nlohmann::json& d);
// The v5 per-type form rope_parameters {full_attention, sliding_attention}:
// false when absent (the family then reads its own form).
bool read_rope_per_type(const ConfigFields& t, RopeParams& full, RopeParams& sliding);

// What differs between a sliding and a full layer, and what every layer carries.
struct LayerPlan {
  int head_dim[2] = {0, 0};  // [sliding, full]
  int kv_heads[2] = {0, 0};
  bool k_eq_v_full = false;  // full layers have no v_proj
  int window = 0;
  int intermediate_size = 0;
  int kv_shared_layers = 0;       // the last N layers reuse K/V
  bool double_wide_shared = false;  // KV-shared layers have a 2x wide MLP
  RopeParams rope[2];               // [sliding, full]
  bool v_norm = false;
  bool layer_scalar = false;
  int num_experts = 0, top_k_experts = 0, expert_intermediate_size = 0;  // every layer's, when set
};
// Checks the final softcap, then fills c.layers from the plan.
void build_layers(const ConfigFields& t, const std::vector<LayerType>& types, const LayerPlan& plan, ModelConfig& c);

}  // namespace splitdec::family_common
