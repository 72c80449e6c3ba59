// Gemma-3 (gemma3: vision-language, gemma3_text: text only). RMSNorm scales
// by (1 + w); attention scale query_pre_attn_scalar^-0.5; RoPE rope_theta on
// full layers (with rope_scaling), rope_local_base_freq on sliding ones.
#include <cmath>

#include "io/families/common.h"

namespace splitdec {

namespace {

using namespace family_common;

void parse_gemma3(const ConfigSource& s, ModelConfig& c) {
  const ConfigFields& top = s.top;
  const ConfigFields& t = s.text;
  // Multimodal token ids live at the top level.
  if (s.multimodal) {
    c.boi_token_id = top.integer("boi_token_index", 255999);
    c.eoi_token_id = top.integer("eoi_token_index", 256000);
    c.image_token_id = top.integer("image_token_index", 262144);
    c.mm_tokens_per_image = top.integer("mm_tokens_per_image", 256, 1);
  }
  const TextGeometry g = read_text_geometry(s, {/*vocab_size=*/262208, /*num_layers=*/26, /*sliding_window=*/4096}, c);

  LayerPlan p;
  RopeParams& sliding = p.rope[0];
  RopeParams& full = p.rope[1];
  if (!read_rope_per_type(t, full, sliding)) {
    if (t.has("rope_scaling")) full = read_rope_dict(t, "rope_scaling", t.raw("rope_scaling"));
    full.theta = t.number("rope_theta", 1e6);  // rope_scaling carries the type and factor, not theta
    sliding = {"default", t.number("rope_local_base_freq", 10000.0), 1.0, 1.0};
    // v5 single-dict form applies to full layers.
    if (t.has("rope_parameters")) full = read_rope_dict(t, "rope_parameters", t.raw("rope_parameters"));
  }
  if (!(full.theta > 0) || !std::isfinite(full.theta)) t.fail("rope_theta", "must be a positive finite number");
  if (!(sliding.theta > 0) || !std::isfinite(sliding.theta)) t.fail("rope_local_base_freq", "must be a positive finite number");

  c.norm_adds_one = true;
  c.attn_scale = float(1.0 / std::sqrt(t.number("query_pre_attn_scalar", 256)));
  if (!(t.number("query_pre_attn_scalar", 256) > 0)) t.fail("query_pre_attn_scalar", "must be positive");
  // HF applies final_logit_softcapping only in the text-only causal LM class;
  // attn_logit_softcapping is never applied by Gemma-3 attention.
  if (s.model_type == "gemma3_text") c.final_logit_softcap = t.optional_number("final_logit_softcapping");
  if (t.has("use_bidirectional_attention") && t.raw("use_bidirectional_attention").is_boolean() &&
      t.boolean("use_bidirectional_attention", false))
    t.fail("use_bidirectional_attention", "value true (an encoder, every token bidirectional) is not supported");
  c.default_policy = s.multimodal ? MaskPolicy::Gemma3 : MaskPolicy::Causal;

  p.head_dim[0] = p.head_dim[1] = g.head_dim;
  p.kv_heads[0] = p.kv_heads[1] = g.kv_heads;
  p.window = g.window;
  p.intermediate_size = g.intermediate_size;
  build_layers(t, g.types, p, c);
}

}  // namespace

const ModelFamily& gemma3_family() {
  static const ModelFamily f{Family::Gemma3,
                             {{"gemma3", true, {VisionTower::Siglip, AudioTower::None}}, {"gemma3_text", false, {}}},
                             parse_gemma3,
                             gemma3_presets,
                             "gemma3",
                             {MediaMarkup::Image::BeginOfImage, /*audio=*/false, /*fixed_image_tokens=*/true,
                              /*image_block_between_blank_lines=*/true, /*pan_and_scan=*/true}};
  return f;
}

}  // namespace splitdec
