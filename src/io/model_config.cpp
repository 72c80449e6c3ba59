#include "io/model_config.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace splitdec {

using nlohmann::json;

namespace {

// Reads typed fields with HF defaults and errors that name the field.
class Fields {
 public:
  Fields(const json& j, std::string where) : j_(j), where_(std::move(where)) {}

  [[noreturn]] void fail(const std::string& field, const std::string& why) const {
    throw ConfigError(where_ + ": field '" + field + "' " + why);
  }
  bool has(const std::string& k) const { return j_.contains(k) && !j_[k].is_null(); }
  const json& raw(const std::string& k) const { return j_[k]; }

  int integer(const std::string& k, int def, int min_value = 0) const {
    if (!has(k)) return def;
    const json& v = j_[k];
    if (!v.is_number_integer()) fail(k, "must be an integer, got " + v.dump());
    const int64_t x = v.get<int64_t>();
    if (x < min_value || x > (int64_t(1) << 30))
      fail(k, "value " + std::to_string(x) + " is out of range [" + std::to_string(min_value) + ", 2^30]");
    return int(x);
  }
  double number(const std::string& k, double def) const {
    if (!has(k)) return def;
    if (!j_[k].is_number()) fail(k, "must be a number, got " + j_[k].dump());
    return j_[k].get<double>();
  }
  std::optional<double> optional_number(const std::string& k) const {
    if (!has(k)) return std::nullopt;
    return number(k, 0);
  }
  bool boolean(const std::string& k, bool def) const {
    if (!has(k)) return def;
    if (!j_[k].is_boolean()) fail(k, "must be true or false, got " + j_[k].dump());
    return j_[k].get<bool>();
  }
  std::string string(const std::string& k, const std::string& def) const {
    if (!has(k)) return def;
    if (!j_[k].is_string()) fail(k, "must be a string, got " + j_[k].dump());
    return j_[k].get<std::string>();
  }

 private:
  const json& j_;
  std::string where_;
};

struct RopeParams {
  std::string type = "default";
  double theta = 10000.0;
  double factor = 1.0;
  double partial_rotary_factor = 1.0;
};

RopeParams read_rope_dict(const Fields& parent, const std::string& field, const json& d) {
  if (!d.is_object()) parent.fail(field, "must be an object");
  Fields f(d, "");
  RopeParams r;
  r.type = d.contains("rope_type") ? f.string("rope_type", "default") : f.string("type", "default");
  r.theta = f.number("rope_theta", r.theta);
  r.factor = f.number("factor", 1.0);
  r.partial_rotary_factor = f.number("partial_rotary_factor", 1.0);
  if (r.type != "default" && r.type != "linear" && r.type != "proportional")
    parent.fail(field + ".rope_type", "value '" + r.type + "' is not supported (default, linear, proportional are)");
  if (!(r.theta > 0)) parent.fail(field + ".rope_theta", "must be positive");
  if (!(r.factor > 0)) parent.fail(field + ".factor", "must be positive");
  if (!(r.partial_rotary_factor > 0 && r.partial_rotary_factor <= 1))
    parent.fail(field + ".partial_rotary_factor", "must lie in (0, 1]");
  if (r.type != "proportional" && r.partial_rotary_factor != 1.0)
    parent.fail(field + ".partial_rotary_factor",
                "is only supported with rope_type 'proportional' (Gemma rotates the whole head)");
  return r;
}

// HF's default / linear / proportional inverse frequencies over head_dim/2
// pairs. For "proportional" the exponent divides by the full head_dim and
// the non-rotated pairs get frequency 0 (cos 1, sin 0).
std::vector<float> inverse_frequencies(const RopeParams& r, int head_dim) {
  const int pairs = head_dim / 2;
  std::vector<float> inv(size_t(pairs), 0.f);
  const int rotated = r.type == "proportional" ? int(r.partial_rotary_factor * head_dim / 2) : pairs;
  for (int i = 0; i < rotated; ++i) {
    const float exponent = float(2 * i) / float(head_dim);
    inv[size_t(i)] = float(1.0 / std::pow(r.theta, double(exponent)) / r.factor);
  }
  return inv;
}

}  // namespace

ModelConfig parse_model_config(const json& root, const std::string& source) {
  if (!root.is_object()) throw ConfigError(source + ": not a JSON object");
  Fields top(root, source);
  ModelConfig c;
  c.model_type = top.string("model_type", "");
  if (c.model_type.empty()) top.fail("model_type", "is missing");

  const bool multimodal = c.model_type == "gemma3" || c.model_type == "gemma4" || c.model_type == "gemma4_unified";
  if (c.model_type == "gemma3" || c.model_type == "gemma3_text") {
    c.family = Family::Gemma3;
  } else if (c.model_type == "gemma4" || c.model_type == "gemma4_unified" || c.model_type == "gemma4_text") {
    c.family = Family::Gemma4;
  } else {
    top.fail("model_type", "value '" + c.model_type +
                               "' is not supported (gemma3, gemma3_text, gemma4, gemma4_unified, gemma4_text are)");
  }
  const bool g4 = c.family == Family::Gemma4;

  json empty = json::object();
  const json* text_json = &root;
  std::string text_where = source;
  if (multimodal) {
    if (root.contains("text_config") && !root["text_config"].is_null()) {
      if (!root["text_config"].is_object()) top.fail("text_config", "must be an object");
      text_json = &root["text_config"];
      text_where = source + " (text_config)";
    } else {
      text_json = &empty;  // every text field takes its default
    }
  }
  Fields t(*text_json, text_where);

  // Multimodal token ids live at the top level.
  if (c.family == Family::Gemma3) {
    if (multimodal) {
      c.boi_token_id = top.integer("boi_token_index", 255999);
      c.eoi_token_id = top.integer("eoi_token_index", 256000);
      c.image_token_id = top.integer("image_token_index", 262144);
      c.mm_tokens_per_image = top.integer("mm_tokens_per_image", 256, 1);
    }
  } else if (multimodal) {
    c.boi_token_id = top.integer("boi_token_id", 255999);
    c.eoi_token_id = top.integer("eoi_token_id", 258882);
    c.image_token_id = top.integer("image_token_id", 258880);
    c.video_token_id = top.integer("video_token_id", 258884);
    c.boa_token_id = top.integer("boa_token_id", 256000);
    c.eoa_token_id = top.integer("eoa_token_index", 258883);
    c.audio_token_id = top.integer("audio_token_id", 258881);
    c.mm_tokens_per_image = top.integer("mm_tokens_per_image", top.integer("vision_soft_tokens_per_image", 280, 1), 1);
  }

  c.vocab_size = t.integer("vocab_size", g4 ? 262144 : 262208, 1);
  c.hidden_size = t.integer("hidden_size", 2304, 1);
  const int intermediate = t.integer("intermediate_size", 9216, 1);
  c.num_layers = t.integer("num_hidden_layers", g4 ? 30 : 26, 1);
  c.num_heads = t.integer("num_attention_heads", 8, 1);
  const int kv_heads = t.integer("num_key_value_heads", 4, 1);
  const int head_dim = t.integer("head_dim", 256, 2);
  c.rms_norm_eps = float(t.number("rms_norm_eps", 1e-6));
  c.bos_token_id = t.integer("bos_token_id", top.integer("bos_token_id", 2));
  c.pad_token_id = t.integer("pad_token_id", top.integer("pad_token_id", 0));
  for (const Fields* f : {&t, &top}) {
    if (!f->has("eos_token_id")) continue;
    const json& e = f->raw("eos_token_id");
    c.eos_token_ids.clear();
    if (e.is_number_integer()) c.eos_token_ids.push_back(e.get<int>());
    else if (e.is_array()) {
      for (const json& x : e) {
        if (!x.is_number_integer()) f->fail("eos_token_id", "must hold integers");
        c.eos_token_ids.push_back(x.get<int>());
      }
    } else f->fail("eos_token_id", "must be an integer or a list of integers");
    break;
  }
  c.tie_word_embeddings = top.boolean("tie_word_embeddings", t.boolean("tie_word_embeddings", true));

  const std::string act = t.string("hidden_activation", t.string("hidden_act", "gelu_pytorch_tanh"));
  if (act != "gelu_pytorch_tanh")
    t.fail("hidden_activation", "value '" + act + "' is not supported (gelu_pytorch_tanh is)");
  if (t.boolean("attention_bias", false)) t.fail("attention_bias", "value true is not supported (no q/k/v/o bias)");
  if (c.num_heads % kv_heads != 0)
    t.fail("num_key_value_heads", "value " + std::to_string(kv_heads) + " does not divide num_attention_heads " +
                                      std::to_string(c.num_heads));
  if (head_dim % 2 != 0) t.fail("head_dim", "must be even for RoPE");

  const int window = t.integer("sliding_window", g4 ? 512 : 4096, 1);
  const int pattern = t.integer("sliding_window_pattern", t.integer("_sliding_window_pattern", 6, 1), 1);

  // Layer types.
  std::vector<LayerType> types;
  if (t.has("layer_types")) {
    const json& lt = t.raw("layer_types");
    if (!lt.is_array() || int(lt.size()) != c.num_layers)
      t.fail("layer_types", "must be a list of num_hidden_layers (" + std::to_string(c.num_layers) + ") strings");
    for (const json& x : lt) {
      const std::string s = x.is_string() ? x.get<std::string>() : x.dump();
      if (s == "sliding_attention") types.push_back(LayerType::Sliding);
      else if (s == "full_attention") types.push_back(LayerType::Full);
      else t.fail("layer_types", "entry '" + s + "' is not supported (sliding_attention, full_attention are)");
    }
  } else {
    for (int i = 0; i < c.num_layers; ++i) types.push_back((i + 1) % pattern == 0 ? LayerType::Full : LayerType::Sliding);
  }
  if (g4) types.back() = LayerType::Full;  // HF forces Gemma-4's last layer to full attention

  // RoPE per layer type.
  RopeParams rope_full, rope_sliding;
  if (t.has("rope_parameters") && t.raw("rope_parameters").contains("full_attention")) {
    const json& rp = t.raw("rope_parameters");
    rope_full = read_rope_dict(t, "rope_parameters.full_attention", rp["full_attention"]);
    if (rp.contains("sliding_attention")) rope_sliding = read_rope_dict(t, "rope_parameters.sliding_attention", rp["sliding_attention"]);
  } else if (g4) {
    rope_sliding = {"default", 10000.0, 1.0, 1.0};
    rope_full = {"proportional", 1e6, 1.0, 0.25};
    if (t.has("rope_parameters")) t.fail("rope_parameters", "must map full_attention / sliding_attention to RoPE settings");
  } else {
    if (t.has("rope_scaling")) rope_full = read_rope_dict(t, "rope_scaling", t.raw("rope_scaling"));
    rope_full.theta = t.number("rope_theta", 1e6);  // rope_scaling carries the type and factor, not theta
    rope_sliding = {"default", t.number("rope_local_base_freq", 10000.0), 1.0, 1.0};
    if (t.has("rope_parameters")) {
      // v5 single-dict form applies to full layers.
      rope_full = read_rope_dict(t, "rope_parameters", t.raw("rope_parameters"));
    }
  }

  // Family-specific attention geometry.
  const int global_head_dim = g4 ? t.integer("global_head_dim", 512, 2) : head_dim;
  const bool k_eq_v = g4 && t.boolean("attention_k_eq_v", false);
  const int global_kv_heads = k_eq_v ? t.integer("num_global_key_value_heads", kv_heads, 1) : kv_heads;
  if (global_head_dim % 2 != 0) t.fail("global_head_dim", "must be even for RoPE");
  if (c.num_heads % global_kv_heads != 0)
    t.fail("num_global_key_value_heads", "value " + std::to_string(global_kv_heads) +
                                             " does not divide num_attention_heads " + std::to_string(c.num_heads));
  int shared = 0;
  bool double_wide = false;
  if (g4) {
    c.norm_adds_one = false;
    c.attn_scale = 1.f;
    c.final_logit_softcap = t.optional_number("final_logit_softcapping");
    if (t.boolean("enable_moe_block", false))
      t.fail("enable_moe_block", "value true (mixture of experts) is not supported");
    if (t.has("num_experts") && t.integer("num_experts", 0) > 0)
      t.fail("num_experts", "value " + t.raw("num_experts").dump() + " (mixture of experts) is not supported");
    const int ple = t.integer("hidden_size_per_layer_input", 256);
    if (ple != 0)
      t.fail("hidden_size_per_layer_input",
             "value " + std::to_string(ple) + " (per-layer embeddings) is not supported; only 0 is");
    const std::string bidir = t.string("use_bidirectional_attention", "");
    if (bidir == "all")
      t.fail("use_bidirectional_attention", "value 'all' (an encoder, every token bidirectional) is not supported");
    if (!bidir.empty() && bidir != "vision")
      t.fail("use_bidirectional_attention", "value '" + bidir + "' is not supported (null, 'vision' are)");
    c.default_policy = bidir == "vision" ? MaskPolicy::Gemma4 : MaskPolicy::Causal;
    shared = t.integer("num_kv_shared_layers", 0);
    if (shared >= c.num_layers)
      t.fail("num_kv_shared_layers", "value " + std::to_string(shared) + " leaves no layer that owns K/V");
    double_wide = t.boolean("use_double_wide_mlp", false);
  } else {
    c.norm_adds_one = true;
    c.attn_scale = float(1.0 / std::sqrt(t.number("query_pre_attn_scalar", 256)));
    if (!(t.number("query_pre_attn_scalar", 256) > 0)) t.fail("query_pre_attn_scalar", "must be positive");
    // HF applies final_logit_softcapping only in the text-only causal LM class;
    // attn_logit_softcapping is never applied by Gemma-3 attention.
    if (c.model_type == "gemma3_text") c.final_logit_softcap = t.optional_number("final_logit_softcapping");
    if (t.has("use_bidirectional_attention") && t.raw("use_bidirectional_attention").is_boolean() &&
        t.boolean("use_bidirectional_attention", false))
      t.fail("use_bidirectional_attention", "value true (an encoder, every token bidirectional) is not supported");
    c.default_policy = multimodal ? MaskPolicy::Gemma3 : MaskPolicy::Causal;
  }
  if (c.final_logit_softcap && !(*c.final_logit_softcap > 0)) t.fail("final_logit_softcapping", "must be positive");

  const int first_shared = c.num_layers - shared;
  c.layers.resize(size_t(c.num_layers));
  for (int i = 0; i < c.num_layers; ++i) {
    LayerSpec& L = c.layers[size_t(i)];
    L.type = types[size_t(i)];
    const bool full = L.type == LayerType::Full;
    L.head_dim = full ? global_head_dim : head_dim;
    L.num_kv_heads = full ? global_kv_heads : kv_heads;
    L.k_eq_v = full && k_eq_v;
    L.window = full ? 0 : window;
    L.intermediate_size = (double_wide && i >= first_shared) ? 2 * intermediate : intermediate;
    L.inv_freq = inverse_frequencies(full ? rope_full : rope_sliding, L.head_dim);
    L.kv_source = i;
    if (i >= first_shared) {
      // Reuses the K/V of the last earlier layer of the same type.
      int src = -1;
      for (int k = first_shared - 1; k >= 0; --k)
        if (types[size_t(k)] == L.type) {
          src = k;
          break;
        }
      if (src < 0)
        t.fail("num_kv_shared_layers", "layer " + std::to_string(i) + " has no earlier layer of its type to share K/V with");
      L.kv_source = src;
    }
  }
  return c;
}

ModelConfig load_model_config(const std::string& model_dir) {
  const std::string path = (std::filesystem::path(model_dir) / "config.json").string();
  std::ifstream in(path);
  if (!in) throw ConfigError(path + ": cannot open");
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    throw ConfigError(path + ": not valid JSON: " + e.what());
  }
  return parse_model_config(j, path);
}

}  // namespace splitdec
