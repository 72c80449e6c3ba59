// Dense Gemma-4 (gemma4, gemma4_unified: vision-language; gemma4_text).
// RMSNorm scales by w; V goes through a weightless RMS norm; attention scale
// 1; global_head_dim on full layers, which may take V from k_proj
// (attention_k_eq_v); proportional RoPE on full layers; the last layer is
// full; the last num_kv_shared_layers reuse earlier K/V; a layer_scalar
// multiplies each layer's output. E2B / E4B add per-layer embeddings
// (hidden_size_per_layer_input), 26B-A4B a mixture of experts beside the
// dense MLP (enable_moe_block).
#include "io/families/common.h"

namespace splitdec {

namespace {

using namespace family_common;

void parse_gemma4(const ConfigSource& s, ModelConfig& c) {
  const ConfigFields& top = s.top;
  const ConfigFields& t = s.text;
  // Multimodal token ids live at the top level.
  if (s.multimodal) {
    c.boi_token_id = top.integer("boi_token_id", 255999);
    c.eoi_token_id = top.integer("eoi_token_id", 258882);
    c.image_token_id = top.integer("image_token_id", 258880);
    c.video_token_id = top.integer("video_token_id", 258884);
    c.boa_token_id = top.integer("boa_token_id", 256000);
    c.eoa_token_id = top.integer("eoa_token_index", 258883);
    c.audio_token_id = top.integer("audio_token_id", 258881);
    c.mm_tokens_per_image = top.integer("mm_tokens_per_image", top.integer("vision_soft_tokens_per_image", 280, 1), 1);
  }
  TextGeometry g = read_text_geometry(s, {/*vocab_size=*/262144, /*num_layers=*/30, /*sliding_window=*/512}, c);
  g.types.back() = LayerType::Full;  // HF forces Gemma-4's last layer to full attention

  LayerPlan p;
  RopeParams& sliding = p.rope[0];
  RopeParams& full = p.rope[1];
  if (!read_rope_per_type(t, full, sliding)) {
    sliding = {"default", 10000.0, 1.0, 1.0};
    full = {"proportional", 1e6, 1.0, 0.25};
    if (t.has("rope_parameters")) t.fail("rope_parameters", "must map full_attention / sliding_attention to RoPE settings");
  }

  const int global_head_dim = t.integer("global_head_dim", 512, 2);
  const bool k_eq_v = t.boolean("attention_k_eq_v", false);
  const int global_kv_heads = k_eq_v ? t.integer("num_global_key_value_heads", g.kv_heads, 1) : g.kv_heads;
  if (global_head_dim % 2 != 0) t.fail("global_head_dim", "must be even for RoPE");
  if (c.num_heads % global_kv_heads != 0)
    t.fail("num_global_key_value_heads", "value " + std::to_string(global_kv_heads) +
                                             " does not divide num_attention_heads " + std::to_string(c.num_heads));

  c.norm_adds_one = false;
  c.attn_scale = 1.f;
  c.final_logit_softcap = t.optional_number("final_logit_softcapping");
  const int ple = t.integer("hidden_size_per_layer_input", 256);
  if (ple < 0) t.fail("hidden_size_per_layer_input", "must not be negative");
  if (ple > 0) {
    if (ple > (1 << 14)) t.fail("hidden_size_per_layer_input", "value " + std::to_string(ple) + " is far past any real checkpoint");
    c.per_layer_dim = ple;
    c.per_layer_vocab = t.integer("vocab_size_per_layer_input", 262144, 1);
    // Every token, and pad (what media rows read), must have a table row.
    if (c.per_layer_vocab < c.vocab_size)
      t.fail("vocab_size_per_layer_input", "value " + std::to_string(c.per_layer_vocab) + " is below vocab_size " +
                                               std::to_string(c.vocab_size) + ": some tokens would have no per-layer row");
    if (c.per_layer_vocab > (1 << 24))
      t.fail("vocab_size_per_layer_input", "value " + std::to_string(c.per_layer_vocab) + " is far past any real checkpoint");
    if (c.pad_token_id < 0 || c.pad_token_id >= c.per_layer_vocab)
      t.fail("pad_token_id", "value " + std::to_string(c.pad_token_id) +
                                 " has no per-layer row (media rows read pad's); it must be below vocab_size_per_layer_input " +
                                 std::to_string(c.per_layer_vocab));
    if (int64_t(c.num_layers) * ple > (int64_t(1) << 24))
      t.fail("hidden_size_per_layer_input", "times num_hidden_layers is far past any real checkpoint");
  }
  const bool moe = t.boolean("enable_moe_block", false);
  if (moe) {
    for (const char* k : {"num_experts", "top_k_experts", "moe_intermediate_size"})
      if (!t.has(k)) t.fail(k, "is required when enable_moe_block is true");
    p.num_experts = t.integer("num_experts", 0, 1);
    p.top_k_experts = t.integer("top_k_experts", 0, 1);
    p.expert_intermediate_size = t.integer("moe_intermediate_size", 0, 1);
    if (p.num_experts > 4096) t.fail("num_experts", "value " + std::to_string(p.num_experts) + " is far past any real checkpoint");
    if (p.expert_intermediate_size > (1 << 20))
      t.fail("moe_intermediate_size", "value " + std::to_string(p.expert_intermediate_size) + " is far past any real checkpoint");
    if (p.top_k_experts > p.num_experts)
      t.fail("top_k_experts", "value " + std::to_string(p.top_k_experts) + " exceeds num_experts " + std::to_string(p.num_experts));
  }
  const std::string bidir = t.string("use_bidirectional_attention", "");
  if (bidir == "all")
    t.fail("use_bidirectional_attention", "value 'all' (an encoder, every token bidirectional) is not supported");
  if (!bidir.empty() && bidir != "vision")
    t.fail("use_bidirectional_attention", "value '" + bidir + "' is not supported (null, 'vision' are)");
  c.default_policy = bidir == "vision" ? MaskPolicy::Gemma4 : MaskPolicy::Causal;
  p.kv_shared_layers = t.integer("num_kv_shared_layers", 0);
  if (p.kv_shared_layers >= c.num_layers)
    t.fail("num_kv_shared_layers",
           "value " + std::to_string(p.kv_shared_layers) + " leaves no layer that owns K/V");
  p.double_wide_shared = t.boolean("use_double_wide_mlp", false);

  p.head_dim[0] = g.head_dim;
  p.head_dim[1] = global_head_dim;
  p.kv_heads[0] = g.kv_heads;
  p.kv_heads[1] = global_kv_heads;
  p.k_eq_v_full = k_eq_v;
  p.window = g.window;
  p.intermediate_size = g.intermediate_size;
  p.v_norm = true;
  p.layer_scalar = true;
  build_layers(t, g.types, p, c);
}

}  // namespace

const ModelFamily& gemma4_family() {
  static const ModelFamily f{Family::Gemma4,
                             {{"gemma4", true, {VisionTower::Gemma4Encoder, AudioTower::Conformer}},
                              {"gemma4_unified", true, {VisionTower::UnifiedPatches, AudioTower::RawFrames}},
                              {"gemma4_text", false, {}}},
                             parse_gemma4,
                             gemma4_presets,
                             "gemma4",
                             {MediaMarkup::Image::SoftToken, /*audio=*/true, /*fixed_image_tokens=*/false,
                              /*image_block_between_blank_lines=*/false, /*pan_and_scan=*/false}};
  return f;
}

}  // namespace splitdec
