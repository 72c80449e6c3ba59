#include "io/families/gemma3_gguf.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/families/gguf_keys.h"
#include "io/gguf.h"
#include "io/model_config.h"

namespace splitdec {

using nlohmann::json;

json gemma3_config_from_gguf(const GgufFile& f) {
  const GgufKeys keys(f);
  auto fail = [&](const std::string& key, const std::string& what) { keys.fail(key, what); };
  auto count = [&](const std::string& key, std::optional<int64_t> fallback, int64_t limit) { return keys.count(key, fallback, limit); };
  auto positive = [&](const std::string& key, double fallback) { return keys.positive(key, fallback); };
  const std::optional<std::string> arch = f.string("general.architecture");
  if (arch != "gemma3")
    fail("general.architecture", arch ? "is '" + *arch + "', expected gemma3" : std::string("is missing"));
  const std::string a = "gemma3.";
  json c;
  c["model_type"] = "gemma3_text";
  c["architectures"] = {"Gemma3ForCausalLM"};
  const int64_t hidden = count(a + "embedding_length", std::nullopt, 1 << 17);
  const int64_t layers = count(a + "block_count", std::nullopt, 1024);
  const int64_t heads = count(a + "attention.head_count", std::nullopt, 1024);
  c["hidden_size"] = hidden;
  c["num_hidden_layers"] = layers;
  c["num_attention_heads"] = heads;
  c["intermediate_size"] = count(a + "feed_forward_length", std::nullopt, 1 << 20);
  c["num_key_value_heads"] = count(a + "attention.head_count_kv", heads, 1024);
  const int64_t head_dim = count(a + "attention.key_length", hidden / heads, 1 << 14);
  if (count(a + "attention.value_length", head_dim, 1 << 14) != head_dim)
    fail(a + "attention.value_length", "differs from attention.key_length (" + std::to_string(head_dim) + "); Gemma-3 has one head size");
  c["head_dim"] = head_dim;
  // llama.cpp scales queries by 1/sqrt(key_length), except on the 62-layer
  // (27B) model: 1/sqrt(embedding_length / head_count) (llama-model.cpp),
  // as the checkpoints' query_pre_attn_scalar says.
  c["query_pre_attn_scalar"] = layers == 62 ? hidden / heads : head_dim;
  c["max_position_embeddings"] = count(a + "context_length", 131072, int64_t(1) << 40);
  c["rms_norm_eps"] = positive(a + "attention.layer_norm_rms_epsilon", 1e-6);
  c["rope_theta"] = positive(a + "rope.freq_base", 10000.0);
  // llama.cpp's Gemma-3 sliding layers use base 10000 and no scaling.
  c["rope_local_base_freq"] = positive(a + "rope.freq_base_swa", 10000.0);
  const std::string scaling = f.string(a + "rope.scaling.type").value_or("none");
  std::optional<double> factor = f.number(a + "rope.scaling.factor");
  if (!factor && f.find(a + "rope.scale_linear")) factor = f.number(a + "rope.scale_linear");  // older files
  if (scaling == "linear" || (scaling == "none" && factor && *factor != 1.0)) {
    if (!factor || !(*factor > 0) || !std::isfinite(*factor)) fail(a + "rope.scaling.factor", "must be a positive number for linear scaling");
    c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", *factor}};
  } else if (scaling != "none") {
    fail(a + "rope.scaling.type", "value '" + scaling + "' is not supported (none and linear are)");
  }
  keys.softcap(c, a + "final_logit_softcapping");

  // Layer types: llama.cpp's Gemma-3 has every 6th layer full, the rest
  // sliding (set_swa_pattern(6)); a file may say otherwise with
  // attention.sliding_window_pattern, a period or one bool per layer (true: sliding).
  const int64_t window = f.integer(a + "attention.sliding_window").value_or(0);
  if (window < 0 || window > (int64_t(1) << 30)) fail(a + "attention.sliding_window", "value " + std::to_string(window) + " is out of range");
  const std::vector<bool> sliding = keys.sliding_layers(a + "attention.sliding_window_pattern", layers, 6);
  json types = json::array();
  for (int64_t i = 0; i < layers; ++i) types.push_back(window > 0 && sliding[size_t(i)] ? "sliding_attention" : "full_attention");
  c["layer_types"] = types;
  if (window > 0) c["sliding_window"] = window;

  const int64_t vocab = keys.table_rows("token_embd.weight");
  c["vocab_size"] = vocab;
  c["tie_word_embeddings"] = f.find_tensor("output.weight") == nullptr;

  keys.special_tokens(c, vocab, {"<end_of_turn>"});
  return c;
}

ModelConfig gemma3_model_config_from_gguf(const GgufFile& f) {
  ModelConfig c = parse_model_config(gemma3_config_from_gguf(f), f.name());
  c.norm_adds_one = false;          // the converter stored 1 + w
  c.embed_scale_rounded = false;    // llama.cpp scales by sqrtf(n_embd) in f32
  return c;
}

}  // namespace splitdec
