#include "io/families/gemma4_gguf.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/families/gguf_keys.h"
#include "io/gguf.h"
#include "io/model_config.h"

namespace splitdec {

using nlohmann::json;

namespace {

// The one value `values` holds at the layers `pick` selects, or `fallback`
// when it selects none; ConfigError naming the key when they differ.
int64_t uniform(const GgufKeys& keys, const std::string& key, const std::vector<int64_t>& values, const std::vector<bool>& pick,
                int64_t fallback, const std::string& which) {
  int64_t v = -1;
  for (size_t i = 0; i < values.size(); ++i) {
    if (!pick[i]) continue;
    if (v >= 0 && values[i] != v)
      keys.fail(key, "differs between " + which + " (" + std::to_string(v) + " and " + std::to_string(values[i]) +
                         " at layer " + std::to_string(i) + "); Gemma-4 has one value for them");
    v = values[i];
  }
  return v < 0 ? fallback : v;
}

}  // namespace

std::string gemma4_kv_sharing_mismatch(const std::vector<bool>& sliding, int64_t shared) {
  if (shared == 0) return "";
  const int64_t owners = int64_t(sliding.size()) - shared;
  bool shared_sliding = false;
  for (size_t i = size_t(owners); i < sliding.size(); ++i) shared_sliding = shared_sliding || sliding[i];
  if (owners >= 2 && !sliding[size_t(owners - 1)] && (!shared_sliding || sliding[size_t(owners - 2)])) return "";
  return "the layers that own K/V (0 to " + std::to_string(owners - 1) +
         ") do not end on a sliding layer then a full one, so llama.cpp's Gemma-4 would hand the " + std::to_string(shared) +
         " KV-shared layers other layers' K/V than the model's (the last earlier owner of their type)";
}

json gemma4_config_from_gguf(const GgufFile& f) {
  const GgufKeys keys(f);
  const std::optional<std::string> arch = f.string("general.architecture");
  if (arch != "gemma4") keys.fail("general.architecture", arch ? "is '" + *arch + "', expected gemma4" : std::string("is missing"));
  const std::string a = "gemma4.";
  json c;
  c["model_type"] = "gemma4_text";
  c["architectures"] = {"Gemma4ForCausalLM"};
  const int64_t hidden = keys.count(a + "embedding_length", std::nullopt, 1 << 17);
  const int64_t layers = keys.count(a + "block_count", std::nullopt, 1024);
  const std::vector<bool> all(size_t(layers), true);
  const int64_t heads = uniform(keys, a + "attention.head_count", keys.per_layer(a + "attention.head_count", std::nullopt, 1024, layers),
                                all, 0, "layers");
  c["hidden_size"] = hidden;
  c["num_hidden_layers"] = layers;
  c["num_attention_heads"] = heads;

  // Layer types: one bool per layer (true: sliding), as the converter writes them.
  const std::string pattern_key = a + "attention.sliding_window_pattern";
  if (!f.find(pattern_key) || f.find(pattern_key)->type != GgufType::Array)
    keys.fail(pattern_key, std::string(f.find(pattern_key) ? "is not an array" : "is missing") +
                               " (Gemma-4 files list every layer's type, one bool per layer)");
  const std::vector<bool> sliding = keys.sliding_layers(pattern_key, layers, 6);
  std::vector<bool> full(sliding.size());
  for (size_t i = 0; i < sliding.size(); ++i) full[i] = !sliding[i];
  if (sliding.back())
    keys.fail(pattern_key, "makes the last layer sliding; Gemma-4's last layer attends to the whole context");
  json types = json::array();
  for (bool s : sliding) types.push_back(s ? "sliding_attention" : "full_attention");
  c["layer_types"] = types;
  const bool any_sliding = std::find(sliding.begin(), sliding.end(), true) != sliding.end();
  if (any_sliding) c["sliding_window"] = keys.count(a + "attention.sliding_window", std::nullopt, int64_t(1) << 30);

  // Head sizes: key_length on full layers, key_length_swa on sliding ones.
  const int64_t head_full = keys.count(a + "attention.key_length", std::nullopt, 1 << 14);
  const int64_t head_swa = keys.count(a + "attention.key_length_swa", head_full, 1 << 14);
  if (keys.count(a + "attention.value_length", head_full, 1 << 14) != head_full)
    keys.fail(a + "attention.value_length", "differs from attention.key_length (" + std::to_string(head_full) + ")");
  if (keys.count(a + "attention.value_length_swa", head_swa, 1 << 14) != head_swa)
    keys.fail(a + "attention.value_length_swa", "differs from attention.key_length_swa (" + std::to_string(head_swa) + ")");
  c["head_dim"] = head_swa;
  c["global_head_dim"] = head_full;

  // The last shared_kv_layers layers reuse earlier layers' K/V.
  const int64_t shared = f.integer(a + "attention.shared_kv_layers").value_or(0);
  if (shared < 0 || shared >= layers)
    keys.fail(a + "attention.shared_kv_layers", "value " + std::to_string(shared) + " is outside [0, block_count " + std::to_string(layers) + ")");
  c["num_kv_shared_layers"] = shared;
  if (const std::string why = gemma4_kv_sharing_mismatch(sliding, shared); !why.empty()) keys.fail(a + "attention.shared_kv_layers", why);
  std::vector<bool> owns_kv, shares_kv;
  for (int64_t i = 0; i < layers; ++i) {
    shares_kv.push_back(i >= layers - shared);
    owns_kv.push_back(!shares_kv.back());
  }

  // Key/value heads per layer type. Full layers without attn_v take V from
  // K (attention_k_eq_v), and only then have their own head count.
  const std::string kv_key = a + "attention.head_count_kv";
  const std::vector<int64_t> kv = keys.per_layer(kv_key, heads, 1024, layers);
  const int64_t kv_swa = uniform(keys, kv_key, kv, sliding, -1, "sliding layers");
  const int64_t kv_full = uniform(keys, kv_key, kv, full, kv_swa, "full layers");
  int with_v = 0, without_v = 0;
  for (int64_t i = 0; i < layers; ++i)
    if (full[size_t(i)] && owns_kv[size_t(i)])
      (f.find_tensor("blk." + std::to_string(i) + ".attn_v.weight") ? with_v : without_v)++;
  if (with_v > 0 && without_v > 0)
    throw FormatError(f.name() + ": " + std::to_string(without_v) + " of the full-attention layers have no attn_v tensor and " +
                      std::to_string(with_v) + " have one; Gemma-4 takes V from K on all full layers or on none");
  const bool k_eq_v = without_v > 0;
  c["attention_k_eq_v"] = k_eq_v;
  c["num_key_value_heads"] = kv_swa < 0 ? kv_full : kv_swa;
  if (k_eq_v) c["num_global_key_value_heads"] = kv_full;
  else if (kv_swa >= 0 && kv_full != kv_swa)
    keys.fail(kv_key, "gives full layers " + std::to_string(kv_full) + " heads and sliding ones " + std::to_string(kv_swa) +
                          ", which Gemma-4 has only where full layers take V from K (they have attn_v tensors here)");

  // MLP widths: the KV-shared layers may be twice as wide (use_double_wide_mlp).
  const std::string ff_key = a + "feed_forward_length";
  const std::vector<int64_t> ff = keys.per_layer(ff_key, std::nullopt, 1 << 20, layers);
  const int64_t width = uniform(keys, ff_key, ff, owns_kv, -1, "the layers that own K/V");
  const int64_t shared_width = uniform(keys, ff_key, ff, shares_kv, width, "the KV-shared layers");
  if (shared_width != width && shared_width != 2 * width)
    keys.fail(ff_key, "gives the KV-shared layers " + std::to_string(shared_width) + ", neither " + std::to_string(width) +
                          " nor twice that (use_double_wide_mlp)");
  c["intermediate_size"] = width;
  c["use_double_wide_mlp"] = shared > 0 && shared_width == 2 * width;

  // Per-layer embeddings (E2B / E4B).
  const std::optional<int64_t> ple_key = f.integer(a + "embedding_length_per_layer_input");
  if (!ple_key) keys.fail(a + "embedding_length_per_layer_input", "is missing (0 for a model without per-layer embeddings)");
  const int64_t ple = *ple_key;
  if (ple < 0 || ple > (1 << 14)) keys.fail(a + "embedding_length_per_layer_input", "value " + std::to_string(ple) + " is outside [0, 16384]");
  c["hidden_size_per_layer_input"] = ple;
  if (ple > 0) c["vocab_size_per_layer_input"] = keys.table_rows("per_layer_token_embd.weight");

  // Experts beside the dense MLP (26B-A4B).
  const int64_t experts = f.integer(a + "expert_count").value_or(0);
  if (experts < 0 || experts > 4096) keys.fail(a + "expert_count", "value " + std::to_string(experts) + " is outside [0, 4096]");
  if (experts == 0 && f.find_tensor("blk.0.ffn_gate_inp.weight"))
    keys.fail(a + "expert_count", "is missing or 0, but the file holds expert tensors (blk.0.ffn_gate_inp.weight)");
  if (experts > 0) {
    c["enable_moe_block"] = true;
    c["num_experts"] = experts;
    c["top_k_experts"] = keys.count(a + "expert_used_count", std::nullopt, experts);
    const std::string key = a + "expert_feed_forward_length";
    c["moe_intermediate_size"] = uniform(keys, key, keys.per_layer(key, std::nullopt, 1 << 20, layers), all, 0, "layers");
  }

  c["max_position_embeddings"] = keys.count(a + "context_length", 131072, int64_t(1) << 40);
  c["rms_norm_eps"] = keys.positive(a + "attention.layer_norm_rms_epsilon", 1e-6);
  keys.softcap(c, a + "final_logit_softcapping");
  // Text only: without a vision tower no token is bidirectional.
  c["use_bidirectional_attention"] = nullptr;

  // RoPE: default on sliding layers; on full layers proportional, which the
  // converter writes as rope_freqs (1 for each rotated pair, 1e30 for the
  // others, so ggml's rotation leaves them in place).
  const std::string scaling = f.string(a + "rope.scaling.type").value_or("none");
  if (scaling != "none") keys.fail(a + "rope.scaling.type", "value '" + scaling + "' is not supported for gemma4 (none is)");
  // llama.cpp scales by these even without a scaling type: only 1 is Gemma-4's.
  for (const std::string& key : {a + "rope.scaling.factor", a + "rope.scale_linear"})
    if (const std::optional<double> factor = f.number(key); factor && *factor != 1.0 && *factor != 0.0)
      keys.fail(key, "value " + std::to_string(*factor) + " is not supported for gemma4 (Gemma-4 does not scale RoPE)");
  if (keys.count(a + "rope.dimension_count_swa", head_swa, 1 << 14) != head_swa)
    keys.fail(a + "rope.dimension_count_swa", "differs from attention.key_length_swa (" + std::to_string(head_swa) +
                                                  "); Gemma-4 rotates the whole head on sliding layers");
  if (keys.count(a + "rope.dimension_count", head_full, 1 << 14) != head_full)
    keys.fail(a + "rope.dimension_count", "differs from attention.key_length (" + std::to_string(head_full) +
                                              "); Gemma-4's full layers mark unrotated pairs in rope_freqs instead");
  json full_rope = {{"rope_type", "default"}, {"rope_theta", keys.positive(a + "rope.freq_base", 10000.0)}};
  const GgufTensor* t = f.find_tensor("rope_freqs.weight");
  if (!t && std::find(full.begin(), full.end(), true) != full.end())
    throw FormatError(f.name() + ": tensor 'rope_freqs.weight' is missing (llama.cpp's Gemma-4 full layers need it)");
  if (t) {
    const std::string what = f.name() + ": tensor 'rope_freqs.weight' ";
    if (t->type != ggml_type::F32 || t->ne.size() != 1 || int64_t(t->ne[0]) != head_full / 2)
      throw FormatError(what + "must be F32 with key_length / 2 = " + std::to_string(head_full / 2) + " values");
    int64_t rotated = 0;
    for (int64_t k = 0; k < head_full / 2; ++k) {
      float x;
      std::memcpy(&x, t->data + 4 * k, 4);
      if (x == 1.f && rotated == k) ++rotated;
      else if (!(x >= 1e20f))
        throw FormatError(what + "value " + std::to_string(x) + " at " + std::to_string(k) +
                          " is neither 1 (a rotated pair, before every unrotated one) nor 1e30 (unrotated)");
    }
    if (rotated == 0) throw FormatError(what + "rotates no pair");
    // The factor, read back as int(factor * key_length / 2), gives `rotated` pairs again.
    full_rope = {{"rope_type", "proportional"},
                 {"rope_theta", full_rope["rope_theta"]},
                 {"partial_rotary_factor", rotated * 2 == head_full ? 1.0 : (double(2 * rotated) + 0.5) / double(head_full)}};
  }
  c["rope_parameters"] = {{"full_attention", full_rope},
                          {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", keys.positive(a + "rope.freq_base_swa", 10000.0)}}}};

  const int64_t vocab = keys.table_rows("token_embd.weight");
  c["vocab_size"] = vocab;
  c["tie_word_embeddings"] = f.find_tensor("output.weight") == nullptr;
  keys.special_tokens(c, vocab, {"<turn|>", "<|tool_response>", "<eos>"});
  return c;
}

ModelConfig gemma4_model_config_from_gguf(const GgufFile& f) {
  ModelConfig c = parse_model_config(gemma4_config_from_gguf(f), f.name());
  c.embed_scale_rounded = false;  // llama.cpp scales by sqrtf(n_embd) in f32
  return c;
}

}  // namespace splitdec
