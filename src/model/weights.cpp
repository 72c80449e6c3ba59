#include "model/weights.h"

#include "core/error.h"
#include "io/safetensors.h"

namespace splitdec {

namespace {
std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}
std::string layer_name(int i, const std::string& leaf) { return "layers." + std::to_string(i) + "." + leaf; }
}  // namespace

std::string find_decoder_prefix(const TensorStore& store) {
  for (const char* p : {"model.language_model.", "model.", "language_model.model."})
    if (store.find(std::string(p) + "embed_tokens.weight")) return p;
  throw FormatError(store.describe() +
                    ": no embedding table found (looked for model.language_model.embed_tokens.weight, "
                    "model.embed_tokens.weight, language_model.model.embed_tokens.weight)");
}

std::vector<WeightSpec> decoder_weight_specs(const ModelConfig& c) {
  const int64_t H = c.hidden_size;
  std::vector<WeightSpec> s;
  s.push_back({"embed_tokens.weight", {c.vocab_size, H}, WeightSpec::Embedding});
  for (int i = 0; i < c.num_layers; ++i) {
    const LayerSpec& L = c.layers[size_t(i)];
    const int64_t q = int64_t(c.num_heads) * L.head_dim, kv = int64_t(L.num_kv_heads) * L.head_dim;
    s.push_back({layer_name(i, "self_attn.q_proj.weight"), {q, H}, WeightSpec::Linear});
    if (!c.is_kv_shared(i)) {
      s.push_back({layer_name(i, "self_attn.k_proj.weight"), {kv, H}, WeightSpec::Linear});
      if (!L.k_eq_v) s.push_back({layer_name(i, "self_attn.v_proj.weight"), {kv, H}, WeightSpec::Linear});
    }
    s.push_back({layer_name(i, "self_attn.o_proj.weight"), {H, q}, WeightSpec::Linear});
    s.push_back({layer_name(i, "self_attn.q_norm.weight"), {L.head_dim}, WeightSpec::Norm});
    if (!c.is_kv_shared(i)) s.push_back({layer_name(i, "self_attn.k_norm.weight"), {L.head_dim}, WeightSpec::Norm});
    for (const char* n : {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                          "post_feedforward_layernorm"})
      s.push_back({layer_name(i, std::string(n) + ".weight"), {H}, WeightSpec::Norm});
    s.push_back({layer_name(i, "mlp.gate_proj.weight"), {L.intermediate_size, H}, WeightSpec::Linear});
    s.push_back({layer_name(i, "mlp.up_proj.weight"), {L.intermediate_size, H}, WeightSpec::Linear});
    s.push_back({layer_name(i, "mlp.down_proj.weight"), {H, L.intermediate_size}, WeightSpec::Linear});
    if (c.family == Family::Gemma4) s.push_back({layer_name(i, "layer_scalar"), {1}, WeightSpec::Scalar});
  }
  s.push_back({"norm.weight", {H}, WeightSpec::Norm});
  return s;
}

ModelWeights load_weights(const ModelConfig& c, const TensorStore& store, const std::function<void(size_t, size_t)>& progress) {
  const std::string prefix = find_decoder_prefix(store);
  auto view = [&](const std::string& name, const std::vector<int64_t>& shape) -> const TensorView& {
    const TensorView& v = store.get(name);
    if (v.shape != shape)
      throw FormatError(v.file + ": tensor '" + name + "' has shape " + shape_str(v.shape) + ", expected " +
                        shape_str(shape));
    return v;
  };
  auto fetch = [&](const std::string& name, const std::vector<int64_t>& shape) { return view(name, shape).to_f32(); };
  auto matrix = [&](const std::string& name, const std::vector<int64_t>& shape) {
    const TensorView& v = view(name, shape);
    return WeightMatrix::from_bytes(weight_format_of(v.dtype), int(shape[0]), int(shape[1]), v.data);
  };
  ModelWeights w;
  w.dtype = store.get(prefix + "embed_tokens.weight").dtype;
  w.layers.resize(size_t(c.num_layers));
  const std::vector<WeightSpec> specs = decoder_weight_specs(c);
  size_t done = 0;
  for (const WeightSpec& spec : specs) {
    if (progress) progress(done++, specs.size());
    const std::string full = prefix + spec.name;
    if (spec.kind == WeightSpec::Scalar && !store.find(full)) continue;  // HF buffer; default 1
    if (spec.kind == WeightSpec::Linear || spec.kind == WeightSpec::Embedding) {
      WeightMatrix m = matrix(full, spec.shape);
      if (spec.name == "embed_tokens.weight") {
        w.embed_tokens = std::move(m);
        continue;
      }
      const size_t dot = spec.name.find('.', 7);
      LayerWeights& L = w.layers[size_t(std::stoi(spec.name.substr(7, dot - 7)))];
      const std::string leaf = spec.name.substr(dot + 1);
      if (leaf == "self_attn.q_proj.weight") L.q_proj = std::move(m);
      else if (leaf == "self_attn.k_proj.weight") L.k_proj = std::move(m);
      else if (leaf == "self_attn.v_proj.weight") L.v_proj = std::move(m);
      else if (leaf == "self_attn.o_proj.weight") L.o_proj = std::move(m);
      else if (leaf == "mlp.gate_proj.weight") L.gate_proj = std::move(m);
      else if (leaf == "mlp.up_proj.weight") L.up_proj = std::move(m);
      else if (leaf == "mlp.down_proj.weight") L.down_proj = std::move(m);
      continue;
    }
    std::vector<float> data = fetch(full, spec.shape);
    if (spec.name == "norm.weight") { w.final_norm = std::move(data); continue; }
    // "layers.N.<leaf>"
    const size_t dot = spec.name.find('.', 7);
    const int layer = std::stoi(spec.name.substr(7, dot - 7));
    const std::string leaf = spec.name.substr(dot + 1);
    LayerWeights& L = w.layers[size_t(layer)];
    if (leaf == "self_attn.q_norm.weight") L.q_norm = std::move(data);
    else if (leaf == "self_attn.k_norm.weight") L.k_norm = std::move(data);
    else if (leaf == "input_layernorm.weight") L.input_norm = std::move(data);
    else if (leaf == "post_attention_layernorm.weight") L.post_attention_norm = std::move(data);
    else if (leaf == "pre_feedforward_layernorm.weight") L.pre_feedforward_norm = std::move(data);
    else if (leaf == "post_feedforward_layernorm.weight") L.post_feedforward_norm = std::move(data);
    else if (leaf == "layer_scalar") L.layer_scalar = data[0];
  }
  if (!c.tie_word_embeddings) {
    for (const char* head : {"lm_head.weight", "language_model.lm_head.weight"}) {
      if (store.find(head)) {
        w.lm_head = matrix(head, {c.vocab_size, c.hidden_size});
        break;
      }
    }
  }
  return w;
}

size_t ModelWeights::bytes() const {
  size_t b = embed_tokens.bytes() + lm_head.bytes() + final_norm.size() * 4;
  for (const LayerWeights& L : layers)
    for (const WeightMatrix* m : {&L.q_proj, &L.k_proj, &L.v_proj, &L.o_proj, &L.gate_proj, &L.up_proj, &L.down_proj})
      b += m->bytes();
  return b;
}

}  // namespace splitdec
