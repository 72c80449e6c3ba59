#include "io/families/common.h"

#include <cmath>

namespace splitdec::family_common {

using nlohmann::json;

TextGeometry read_text_geometry(const ConfigSource& s, const TextDefaults& d, ModelConfig& c) {
  const ConfigFields& t = s.text;
  const ConfigFields& top = s.top;
  TextGeometry g;
  c.vocab_size = t.integer("vocab_size", d.vocab_size, 1);
  c.hidden_size = t.integer("hidden_size", 2304, 1);
  g.intermediate_size = t.integer("intermediate_size", 9216, 1);
  c.num_layers = t.integer("num_hidden_layers", d.num_layers, 1);
  c.num_heads = t.integer("num_attention_heads", 8, 1);
  g.kv_heads = t.integer("num_key_value_heads", 4, 1);
  g.head_dim = t.integer("head_dim", 256, 2);
  // Sizes far past any real checkpoint are refused here, before anything
  // sized by them is allocated.
  const auto at_most = [&](const char* field, int value, int limit) {
    if (value > limit) t.fail(field, "value " + std::to_string(value) + " is more than the supported " + std::to_string(limit));
  };
  at_most("vocab_size", c.vocab_size, 1 << 24);
  at_most("hidden_size", c.hidden_size, 1 << 17);
  at_most("intermediate_size", g.intermediate_size, 1 << 20);
  at_most("num_hidden_layers", c.num_layers, 1024);
  at_most("num_attention_heads", c.num_heads, 1024);
  at_most("num_key_value_heads", g.kv_heads, 1024);
  at_most("head_dim", g.head_dim, 1 << 14);
  c.rms_norm_eps = float(t.number("rms_norm_eps", 1e-6));
  if (!(c.rms_norm_eps > 0) || !std::isfinite(c.rms_norm_eps))
    t.fail("rms_norm_eps", "must be a positive finite number, got " + std::to_string(c.rms_norm_eps));
  c.bos_token_id = t.integer("bos_token_id", top.integer("bos_token_id", 2));
  c.pad_token_id = t.integer("pad_token_id", top.integer("pad_token_id", 0));
  for (const ConfigFields* f : {&t, &top}) {
    if (!f->has("eos_token_id")) continue;
    const json& e = f->raw("eos_token_id");
    c.eos_token_ids.clear();
    const auto token_id = [&](const json& x) {
      if (!x.is_number_integer()) f->fail("eos_token_id", "must hold integers");
      const int64_t id = x.get<int64_t>();
      if (id < 0 || id >= c.vocab_size)
        f->fail("eos_token_id", "value " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(c.vocab_size) + ")");
      return int(id);
    };
    if (e.is_number_integer()) c.eos_token_ids.push_back(token_id(e));
    else if (e.is_array()) {
      for (const json& x : e) c.eos_token_ids.push_back(token_id(x));
    } else f->fail("eos_token_id", "must be an integer or a list of integers");
    break;
  }
  c.tie_word_embeddings = top.boolean("tie_word_embeddings", t.boolean("tie_word_embeddings", true));

  const std::string act = t.string("hidden_activation", t.string("hidden_act", "gelu_pytorch_tanh"));
  if (act != "gelu_pytorch_tanh")
    t.fail("hidden_activation", "value '" + act + "' is not supported (gelu_pytorch_tanh is)");
  if (t.boolean("attention_bias", false)) t.fail("attention_bias", "value true is not supported (no q/k/v/o bias)");
  if (c.num_heads % g.kv_heads != 0)
    t.fail("num_key_value_heads", "value " + std::to_string(g.kv_heads) + " does not divide num_attention_heads " +
                                      std::to_string(c.num_heads));
  if (g.head_dim % 2 != 0) t.fail("head_dim", "must be even for RoPE");

  g.window = t.integer("sliding_window", d.sliding_window, 1);
  const int pattern = t.integer("sliding_window_pattern", t.integer("_sliding_window_pattern", 6, 1), 1);
  if (t.has("layer_types")) {
    const json& lt = t.raw("layer_types");
    if (!lt.is_array() || int(lt.size()) != c.num_layers)
      t.fail("layer_types", "must be a list of num_hidden_layers (" + std::to_string(c.num_layers) + ") strings");
    for (const json& x : lt) {
      const std::string name = x.is_string() ? x.get<std::string>() : x.dump();
      if (name == "sliding_attention") g.types.push_back(LayerType::Sliding);
      else if (name == "full_attention") g.types.push_back(LayerType::Full);
      else t.fail("layer_types", "entry '" + name + "' is not supported (sliding_attention, full_attention are)");
    }
  } else {
    for (int i = 0; i < c.num_layers; ++i) g.types.push_back((i + 1) % pattern == 0 ? LayerType::Full : LayerType::Sliding);
  }
  return g;
}

RopeParams read_rope_dict(const ConfigFields& parent, const std::string& field, const json& d) {
  if (!d.is_object()) parent.fail(field, "must be an object");
  ConfigFields f(d, "");
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

bool read_rope_per_type(const ConfigFields& t, RopeParams& full, RopeParams& sliding) {
  if (!t.has("rope_parameters") || !t.raw("rope_parameters").contains("full_attention")) return false;
  const json& rp = t.raw("rope_parameters");
  full = read_rope_dict(t, "rope_parameters.full_attention", rp["full_attention"]);
  if (rp.contains("sliding_attention")) sliding = read_rope_dict(t, "rope_parameters.sliding_attention", rp["sliding_attention"]);
  return true;
}

namespace {

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

void build_layers(const ConfigFields& t, const std::vector<LayerType>& types, const LayerPlan& p, ModelConfig& c) {
  if (c.final_logit_softcap && !(*c.final_logit_softcap > 0)) t.fail("final_logit_softcapping", "must be positive");
  const int first_shared = c.num_layers - p.kv_shared_layers;
  c.layers.resize(size_t(c.num_layers));
  for (int i = 0; i < c.num_layers; ++i) {
    LayerSpec& L = c.layers[size_t(i)];
    L.type = types[size_t(i)];
    const int full = L.type == LayerType::Full ? 1 : 0;
    L.head_dim = p.head_dim[full];
    L.num_kv_heads = p.kv_heads[full];
    L.k_eq_v = full && p.k_eq_v_full;
    L.window = full ? 0 : p.window;
    L.intermediate_size = (p.double_wide_shared && i >= first_shared) ? 2 * p.intermediate_size : p.intermediate_size;
    L.inv_freq = inverse_frequencies(p.rope[full], L.head_dim);
    L.v_norm = p.v_norm;
    L.layer_scalar = p.layer_scalar;
    L.num_experts = p.num_experts;
    L.top_k_experts = p.top_k_experts;
    L.expert_intermediate_size = p.expert_intermediate_size;
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
}

}  // namespace splitdec::family_common
