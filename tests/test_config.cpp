// config.json parsing: defaults, every family, and every error.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/model_config.h"

using namespace splitdec;
using nlohmann::json;

namespace {

ModelConfig parse(const json& j) { return parse_model_config(j, "config.json"); }

// Expects a ConfigError whose message contains every fragment.
void expect_error(const json& j, std::initializer_list<const char*> fragments) {
  try {
    parse(j);
    FAIL() << "no error for " << j.dump();
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    for (const char* f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "'" << f << "' not in: " << msg;
  }
}

json gemma4_text(json extra = json::object()) {
  json t = {{"hidden_size_per_layer_input", 0}, {"num_hidden_layers", 6}};
  t.update(extra);
  return {{"model_type", "gemma4"}, {"text_config", t}};
}

}  // namespace

TEST(Config, Gemma3TextDefaultsFollowHuggingFace) {
  const ModelConfig c = parse({{"model_type", "gemma3_text"}});
  EXPECT_EQ(c.family, Family::Gemma3);
  EXPECT_EQ(c.vocab_size, 262208);
  EXPECT_EQ(c.hidden_size, 2304);
  EXPECT_EQ(c.num_layers, 26);
  EXPECT_EQ(c.num_heads, 8);
  EXPECT_TRUE(c.norm_adds_one);
  EXPECT_FALSE(c.layers[0].v_norm);  // per-layer family differences are data
  EXPECT_FALSE(c.layers[0].layer_scalar);
  EXPECT_FLOAT_EQ(c.attn_scale, 1.f / 16.f);  // query_pre_attn_scalar 256
  EXPECT_EQ(c.default_policy, MaskPolicy::Causal);
  EXPECT_FALSE(c.final_logit_softcap.has_value());
  // sliding_window_pattern 6: layer 5, 11, ... are full.
  for (int i = 0; i < 26; ++i)
    EXPECT_EQ(c.layers[size_t(i)].type, (i + 1) % 6 == 0 ? LayerType::Full : LayerType::Sliding) << i;
  EXPECT_EQ(c.layers[0].window, 4096);
  EXPECT_EQ(c.layers[5].window, 0);
  EXPECT_EQ(c.layers[0].head_dim, 256);
  EXPECT_EQ(c.layers[0].num_kv_heads, 4);
  // Sliding layers use rope_local_base_freq 1e4, full layers rope_theta 1e6.
  EXPECT_FLOAT_EQ(c.layers[0].inv_freq[1], float(1.0 / std::pow(1e4, 2.0 / 256)));
  EXPECT_FLOAT_EQ(c.layers[5].inv_freq[1], float(1.0 / std::pow(1e6, 2.0 / 256)));
}

TEST(Config, Gemma3MultimodalReadsTextConfigAndTokens) {
  const ModelConfig c = parse({{"model_type", "gemma3"},
                               {"mm_tokens_per_image", 64},
                               {"text_config",
                                {{"num_hidden_layers", 6},
                                 {"final_logit_softcapping", 30.0},
                                 {"rope_scaling", {{"rope_type", "linear"}, {"factor", 8.0}}}}}});
  EXPECT_EQ(c.num_layers, 6);
  EXPECT_EQ(c.boi_token_id, 255999);
  EXPECT_EQ(c.eoi_token_id, 256000);
  EXPECT_EQ(c.image_token_id, 262144);
  EXPECT_EQ(c.mm_tokens_per_image, 64);
  EXPECT_EQ(c.default_policy, MaskPolicy::Gemma3);
  // The conditional-generation class never applies the final softcap.
  EXPECT_FALSE(c.final_logit_softcap.has_value());
  // Linear scaling divides the full layers' frequencies only.
  EXPECT_FLOAT_EQ(c.layers[5].inv_freq[0], 1.f / 8.f);
  EXPECT_FLOAT_EQ(c.layers[0].inv_freq[0], 1.f);
}

TEST(Config, Gemma3TextAppliesFinalSoftcap) {
  const ModelConfig c = parse({{"model_type", "gemma3_text"}, {"final_logit_softcapping", 30.0}});
  ASSERT_TRUE(c.final_logit_softcap.has_value());
  EXPECT_FLOAT_EQ(*c.final_logit_softcap, 30.f);
}

TEST(Config, Gemma4Geometry) {
  const ModelConfig c = parse(gemma4_text({{"num_key_value_heads", 4},
                                           {"num_global_key_value_heads", 2},
                                           {"attention_k_eq_v", true},
                                           {"use_bidirectional_attention", "vision"},
                                           {"final_logit_softcapping", 30.0},
                                           {"num_kv_shared_layers", 2},
                                           {"layer_types", {"sliding_attention", "sliding_attention", "full_attention",
                                                            "sliding_attention", "sliding_attention",
                                                            "sliding_attention"}}}));
  EXPECT_EQ(c.family, Family::Gemma4);
  EXPECT_FALSE(c.norm_adds_one);
  for (const LayerSpec& L : c.layers) EXPECT_TRUE(L.v_norm && L.layer_scalar);
  EXPECT_FLOAT_EQ(c.attn_scale, 1.f);
  EXPECT_EQ(c.default_policy, MaskPolicy::Gemma4);
  ASSERT_TRUE(c.final_logit_softcap.has_value());
  // The last layer is forced to full attention.
  EXPECT_EQ(c.layers[5].type, LayerType::Full);
  EXPECT_EQ(c.layers[2].head_dim, 512);  // global_head_dim default
  EXPECT_EQ(c.layers[2].num_kv_heads, 2);
  EXPECT_TRUE(c.layers[2].k_eq_v);
  EXPECT_EQ(c.layers[0].head_dim, 256);
  EXPECT_EQ(c.layers[0].num_kv_heads, 4);
  EXPECT_FALSE(c.layers[0].k_eq_v);
  EXPECT_EQ(c.layers[0].window, 512);
  // Shared layers 4 (sliding) and 5 (full) read layers 3 and 2.
  EXPECT_EQ(c.layers[4].kv_source, 3);
  EXPECT_EQ(c.layers[5].kv_source, 2);
  EXPECT_TRUE(c.is_kv_shared(4));
  EXPECT_FALSE(c.is_kv_shared(3));
  // Proportional RoPE on full layers: 0.25 * 512 / 2 = 64 rotated pairs, the
  // exponent divides by the full head dim, the other 192 pairs are 0.
  const auto& f = c.layers[2].inv_freq;
  ASSERT_EQ(f.size(), 256u);
  EXPECT_FLOAT_EQ(f[1], float(1.0 / std::pow(1e6, 2.0 / 512)));
  EXPECT_GT(f[63], 0.f);
  EXPECT_EQ(f[64], 0.f);
  EXPECT_EQ(f[255], 0.f);
  // Sliding: default RoPE, theta 1e4 over head_dim 256.
  EXPECT_FLOAT_EQ(c.layers[0].inv_freq[1], float(1.0 / std::pow(1e4, 2.0 / 256)));
}

TEST(Config, Gemma4WithoutKEqVIgnoresGlobalKvHeads) {
  const ModelConfig c = parse(gemma4_text({{"num_key_value_heads", 4}, {"num_global_key_value_heads", 1}}));
  EXPECT_EQ(c.layers[5].num_kv_heads, 4);
  EXPECT_EQ(c.default_policy, MaskPolicy::Causal);  // use_bidirectional_attention null
}

TEST(Config, Gemma4UnifiedAndRopeParameters) {
  const ModelConfig c =
      parse({{"model_type", "gemma4_unified"},
             {"text_config",
              {{"hidden_size_per_layer_input", 0},
               {"num_hidden_layers", 2},
               {"global_head_dim", 64},
               {"rope_parameters",
                {{"full_attention", {{"rope_type", "proportional"}, {"partial_rotary_factor", 0.5}, {"rope_theta", 100.0}}},
                 {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10.0}}}}}}}});
  EXPECT_EQ(c.layers[1].inv_freq.size(), 32u);
  EXPECT_GT(c.layers[1].inv_freq[15], 0.f);
  EXPECT_EQ(c.layers[1].inv_freq[16], 0.f);
  EXPECT_FLOAT_EQ(c.layers[0].inv_freq[1], float(1.0 / std::pow(10.0, 2.0 / 256)));
}

TEST(Config, Errors) {
  expect_error(json::array(), {"not a JSON object"});
  expect_error(json::object(), {"model_type", "missing"});
  expect_error({{"model_type", "llama"}}, {"model_type", "llama", "not supported"});
  // The message lists every registered model_type.
  expect_error({{"model_type", "llama"}}, {"(gemma3, gemma3_text, gemma4, gemma4_unified, gemma4_text are)"});
  expect_error({{"model_type", "gemma3_text"}, {"hidden_size", "big"}}, {"hidden_size", "integer"});
  expect_error({{"model_type", "gemma3_text"}, {"hidden_size", -4}}, {"hidden_size", "out of range"});
  expect_error({{"model_type", "gemma3_text"}, {"num_key_value_heads", 3}}, {"num_key_value_heads", "3", "divide"});
  expect_error({{"model_type", "gemma3_text"}, {"hidden_activation", "silu"}}, {"hidden_activation", "silu"});
  expect_error({{"model_type", "gemma3_text"}, {"attention_bias", true}}, {"attention_bias"});
  expect_error({{"model_type", "gemma3_text"}, {"layer_types", {"full_attention"}}}, {"layer_types", "26"});
  expect_error({{"model_type", "gemma3_text"}, {"num_hidden_layers", 1}, {"layer_types", {"chunked_attention"}}},
               {"layer_types", "chunked_attention"});
  expect_error({{"model_type", "gemma3_text"}, {"rope_scaling", {{"rope_type", "yarn"}, {"factor", 4}}}},
               {"rope_scaling.rope_type", "yarn"});
  expect_error({{"model_type", "gemma3_text"}, {"use_bidirectional_attention", true}}, {"use_bidirectional_attention"});
  expect_error({{"model_type", "gemma3_text"}, {"head_dim", 7}}, {"head_dim", "even"});
  expect_error({{"model_type", "gemma3"}, {"text_config", 3}}, {"text_config", "object"});
  // Gemma-4: experts need their sizes; features out of scope.
  expect_error(gemma4_text({{"enable_moe_block", true}}), {"num_experts", "required", "enable_moe_block"});
  expect_error(gemma4_text({{"enable_moe_block", true}, {"num_experts", 4}, {"top_k_experts", 5}, {"moe_intermediate_size", 8}}),
               {"top_k_experts", "5", "num_experts 4"});
  expect_error(gemma4_text({{"use_bidirectional_attention", "all"}}), {"use_bidirectional_attention", "'all'"});
  expect_error(gemma4_text({{"use_bidirectional_attention", "text"}}), {"use_bidirectional_attention", "'text'"});
  expect_error(gemma4_text({{"num_kv_shared_layers", 6}}), {"num_kv_shared_layers", "6"});
  expect_error(gemma4_text({{"num_kv_shared_layers", 5}}), {"num_kv_shared_layers", "no earlier layer"});
  expect_error(gemma4_text({{"attention_k_eq_v", true}, {"num_global_key_value_heads", 3}}),
               {"num_global_key_value_heads", "3"});
  expect_error(gemma4_text({{"rope_parameters",
                             {{"full_attention", {{"rope_type", "default"}, {"partial_rotary_factor", 0.5}}}}}}),
               {"partial_rotary_factor", "proportional"});
}

// Values from a hostile config.json are refused by name before anything
// sized by them is allocated, and numbers outside their domain never pass.
TEST(Config, SizesAndDomainsAreCheckedFirst) {
  expect_error({{"model_type", "gemma3_text"}, {"head_dim", 1 << 29}}, {"head_dim", "more than"});
  expect_error({{"model_type", "gemma3_text"}, {"num_hidden_layers", 1 << 22}}, {"num_hidden_layers", "more than"});
  expect_error({{"model_type", "gemma3_text"}, {"vocab_size", 1 << 30}}, {"vocab_size", "more than"});
  expect_error({{"model_type", "gemma3_text"}, {"rms_norm_eps", 0}}, {"rms_norm_eps", "positive"});
  expect_error({{"model_type", "gemma3_text"}, {"rms_norm_eps", -1e-6}}, {"rms_norm_eps", "positive"});
  expect_error({{"model_type", "gemma3_text"}, {"rope_theta", 0}}, {"rope_theta", "positive"});
  expect_error({{"model_type", "gemma3_text"}, {"eos_token_id", int64_t(1) << 40}}, {"eos_token_id", "outside the vocabulary"});
  expect_error({{"model_type", "gemma3_text"}, {"eos_token_id", {1, -3}}}, {"eos_token_id", "-3"});
}
