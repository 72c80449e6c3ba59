#include "model/weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "core/error.h"
#include "core/machine.h"
#include "core/thread_pool.h"
#include "io/safetensors.h"
#include "model/quantized_tensors.h"

namespace splitdec {

namespace {
std::string layer_name(int i, const std::string& leaf) { return "layers." + std::to_string(i) + "." + leaf; }
template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
}  // namespace

WeightLoading weight_loading_named(const std::string& name) {
  WeightLoading w;
  if (name.empty() || name == "checkpoint") return w;
  const bool f32act = name.size() > 7 && name.ends_with("-f32act");
  const std::string base = f32act ? name.substr(0, name.size() - 7) : name;
  w.f32_activations = f32act;
  if (base == "q8") {
    w.format = WeightFormat::Q8_0;
  } else if (base == "q4") {
    w.format = WeightFormat::Q4_0;
    w.embedding_format = WeightFormat::Q8_0;
  } else {
    throw InputError("unknown weights format '" + name +
                     "': use checkpoint (as stored), q8 (8-bit blocks, int8 activations in decode), q4 (4-bit blocks, "
                     "8-bit embedding, int8 activations in decode), or q8-f32act / q4-f32act (the same with f32 "
                     "activations)");
  }
  return w;
}

std::string find_decoder_prefix(const TensorStore& store) {
  for (const char* p : {"model.language_model.", "model.", "language_model.model."})
    if (store.find(std::string(p) + "embed_tokens.weight")) return p;
  throw FormatError(store.describe() +
                    ": no embedding table found (looked for model.language_model.embed_tokens.weight, "
                    "model.embed_tokens.weight, language_model.model.embed_tokens.weight)");
}

std::vector<WeightSpec> decoder_weight_specs(const ModelConfig& c) {
  const int64_t H = c.hidden_size;
  using L = LayerWeights;
  std::vector<WeightSpec> s;
  s.push_back({"embed_tokens.weight", {c.vocab_size, H}, WeightSpec::Embedding, -1, &ModelWeights::embed_tokens});
  for (int i = 0; i < c.num_layers; ++i) {
    const LayerSpec& spec = c.layers[size_t(i)];
    const int64_t q = int64_t(c.num_heads) * spec.head_dim, kv = int64_t(spec.num_kv_heads) * spec.head_dim;
    const int64_t I = spec.intermediate_size;
    const bool owns_kv = !c.is_kv_shared(i);
    auto add = [&](const std::string& leaf, std::vector<int64_t> shape, WeightSpec::Kind kind, auto slot) {
      s.push_back({layer_name(i, leaf), std::move(shape), kind, i, slot});
    };
    add("self_attn.q_proj.weight", {q, H}, WeightSpec::Linear, &L::q_proj);
    if (owns_kv) {
      add("self_attn.k_proj.weight", {kv, H}, WeightSpec::Linear, &L::k_proj);
      if (!spec.k_eq_v) add("self_attn.v_proj.weight", {kv, H}, WeightSpec::Linear, &L::v_proj);
    }
    add("self_attn.o_proj.weight", {H, q}, WeightSpec::Linear, &L::o_proj);
    add("self_attn.q_norm.weight", {spec.head_dim}, WeightSpec::Norm, &L::q_norm);
    if (owns_kv) add("self_attn.k_norm.weight", {spec.head_dim}, WeightSpec::Norm, &L::k_norm);
    add("input_layernorm.weight", {H}, WeightSpec::Norm, &L::input_norm);
    add("post_attention_layernorm.weight", {H}, WeightSpec::Norm, &L::post_attention_norm);
    add("pre_feedforward_layernorm.weight", {H}, WeightSpec::Norm, &L::pre_feedforward_norm);
    add("post_feedforward_layernorm.weight", {H}, WeightSpec::Norm, &L::post_feedforward_norm);
    add("mlp.gate_proj.weight", {I, H}, WeightSpec::Linear, &L::gate_proj);
    add("mlp.up_proj.weight", {I, H}, WeightSpec::Linear, &L::up_proj);
    add("mlp.down_proj.weight", {H, I}, WeightSpec::Linear, &L::down_proj);
    if (spec.layer_scalar) {
      add("layer_scalar", {1}, WeightSpec::Scalar, &L::layer_scalar);
      s.back().optional = true;  // an HF buffer some checkpoints omit; default 1
    }
  }
  s.push_back({"norm.weight", {H}, WeightSpec::Norm, -1, &ModelWeights::final_norm});
  return s;
}


std::map<std::string, bool> decoder_matrix_names(const ModelConfig& c, const std::string& prefix) {
  std::map<std::string, bool> out;
  for (const WeightSpec& s : decoder_weight_specs(c))
    if (s.kind == WeightSpec::Linear || s.kind == WeightSpec::Embedding) out[prefix + s.name] = s.kind == WeightSpec::Embedding;
  if (!c.tie_word_embeddings)
    for (const char* head : {"lm_head.weight", "language_model.lm_head.weight"}) out[head] = true;
  return out;
}

int convert_piece_rows(int in) { return std::clamp((16 << 20) / std::max(1, in), 1, 4096); }

void convert_rows(const TensorStore& store, const TensorView& v, int r0, int rows, WeightMatrix& dst, int dst_r0) {
  const int in = int(v.shape[1]);
  TensorView piece = v;
  piece.shape = {rows, in};
  piece.data = v.data + size_t(r0) * size_t(in) * dtype_size(v.dtype);
  piece.nbytes = size_t(rows) * size_t(in) * dtype_size(v.dtype);
  if (const int64_t bad = piece.first_non_finite(); bad >= 0)
    throw FormatError(v.file + ": tensor '" + v.name + "' holds a non-finite value (NaN or Inf) at element " +
                      std::to_string(int64_t(r0) * in + bad));
  const std::vector<float> f32 = piece.to_f32();
  ThreadPool::global()->parallel_for(rows, [&](int64_t a, int64_t b) {
    try {
      dst.set_rows_f32(dst_r0 + int(a), int(b - a), f32.data() + size_t(a) * size_t(in));
    } catch (const InputError& e) {
      throw FormatError(v.file + ": tensor '" + v.name + "' cannot be stored as " + weight_format_name(dst.format) + ": " + e.what());
    }
  });
  store.release(piece);
}

ModelWeights load_weights(const ModelConfig& c, const TensorStore& store, const std::function<void(size_t, size_t)>& progress,
                          const WeightLoading& loading) {
  const std::string prefix = find_decoder_prefix(store);
  auto view = [&](const std::string& name, const std::vector<int64_t>& shape) -> const TensorView& {
    const TensorView& v = store.get(name);
    if (v.shape != shape)
      throw FormatError(v.file + ": tensor '" + name + "' has shape " + shape_text(v.shape) + ", expected " +
                        shape_text(shape));
    return v;
  };
  // Weights are read once here, so a NaN or Inf is caught by name now rather
  // than as garbage logits later. `values` holds v's elements (v itself, or
  // its copy).
  auto check_finite = [&](const TensorView& v, const uint8_t* values) {
    TensorView at = v;
    at.data = values;
    if (const int64_t bad = at.first_non_finite(); bad >= 0)
      throw FormatError(v.file + ": tensor '" + v.name + "' holds a non-finite value (NaN or Inf) at element " + std::to_string(bad));
  };
  // The format a 2-D float tensor is stored converted to, if any.
  auto target = [&](const TensorView& v, bool embedding) -> std::optional<WeightFormat> {
    const std::optional<WeightFormat> f = embedding && loading.embedding_format ? loading.embedding_format : loading.format;
    if (!f || v.shape.size() != 2 || !dtype_is_float(v.dtype) || *f == weight_format_of(v.dtype) ||
        !weight_format_fits(*f, int(v.shape[1])))
      return std::nullopt;
    return f;
  };
  // Each tensor is copied out piece by piece, dropping the file's pages as
  // it goes (TensorStore::copy_out): peak memory is the weights, not the
  // weights plus the largest tensor (the 262144-row embedding) twice.
  auto fetch = [&](const std::string& name, const std::vector<int64_t>& shape) {
    const TensorView& v = view(name, shape);
    check_finite(v, v.data);
    std::vector<float> values = v.to_f32();
    store.release(v);
    return values;
  };
  auto matrix = [&](const std::string& name, const std::vector<int64_t>& shape, bool embedding) {
    const int out = int(shape[0]), in = int(shape[1]);
    const TensorView& stored = store.get(name);
    if (stored.blocks != BlockType::None) {  // a GGUF's Q8_0 / Q4_0 blocks: splitdec's own, copied as they are
      const TensorView& v = view(name, shape);
      const WeightFormat f = v.blocks == BlockType::Q8_0 ? WeightFormat::Q8_0 : WeightFormat::Q4_0;
      if (!weight_format_fits(f, in) || size_t(out) * weight_row_bytes(f, in) != v.nbytes)
        throw FormatError(v.file + ": tensor '" + v.name + "' holds " + std::to_string(v.nbytes) + " bytes, not " +
                          weight_format_name(f) + " rows of " + std::to_string(in));
      WeightMatrix m = WeightMatrix::zeros(f, out, in);
      store.copy_out(v, m.data.data());
      m.int8_activations = !loading.f32_activations;
      return m;
    }
    if (!dtype_is_float(stored.dtype)) {  // quantized in the file: its own shape rules
      WeightMatrix m = load_quantized_matrix(store, stored, out, in);
      m.int8_activations = !loading.f32_activations;
      return m;
    }
    const TensorView& v = view(name, shape);
    const std::optional<WeightFormat> to = target(v, embedding);
    if (!to) {
      WeightMatrix m = WeightMatrix::zeros(weight_format_of(v.dtype), out, in);
      store.copy_out(v, m.data.data());
      check_finite(v, m.data.data());
      return m;
    }
    // Converted a piece at a time (checked, converted, file pages dropped):
    // the f32 scratch and the resident file stay small.
    WeightMatrix m = WeightMatrix::zeros(*to, out, in);
    m.int8_activations = !loading.f32_activations;
    for (int r0 = 0, step = convert_piece_rows(in); r0 < out; r0 += step) convert_rows(store, v, r0, std::min(step, out - r0), m, r0);
    return m;
  };
  // Weights are copied out of the mapped files into memory: weights larger
  // than the machine are refused before any copy (counted as they will be
  // stored: a matrix converted to `loading.format` at its new size).
  // Only the decoder's matrices convert; media towers load as stored.
  const std::map<std::string, bool> converted = decoder_matrix_names(c, prefix);
  size_t total = 0;
  for (const auto& [name, v] : store.tensors()) {
    const auto it = converted.find(name);
    const std::optional<WeightFormat> to = it == converted.end() ? std::nullopt : target(v, it->second);
    total += to ? size_t(v.shape[0]) * weight_row_bytes(*to, int(v.shape[1])) : v.nbytes;
  }
  if (const uint64_t have = physical_memory_bytes(); have > 0 && total > have)
    throw CapacityError("the weights need " + format_bytes(total) + " of memory, more than this machine's " + format_bytes(have) +
                        (loading.format ? "" : " (quantize them: --weights q8 or q4, or splitdec quantize)"));
  ModelWeights w;
  // The checkpoint's float type (HF rounds the embedding scale to it): the
  // embedding's, or where that is quantized the final norm's (norms never are).
  w.dtype = store.get(prefix + "embed_tokens.weight").dtype;
  if (!dtype_is_float(w.dtype)) w.dtype = store.get(prefix + "norm.weight").dtype;
  if (!c.embed_scale_rounded) w.dtype = DType::F32;  // GGUF: the scale stays f32
  w.layers.resize(size_t(c.num_layers));
  const std::vector<WeightSpec> specs = decoder_weight_specs(c);
  size_t done = 0;
  for (const WeightSpec& spec : specs) {
    if (progress) progress(done++, specs.size());
    const std::string full = prefix + spec.name;
    if (spec.optional && !store.find(full)) continue;
    LayerWeights* layer = spec.layer >= 0 ? &w.layers[size_t(spec.layer)] : nullptr;
    std::visit(Overloaded{
                   [&](WeightMatrix LayerWeights::*m) { layer->*m = matrix(full, spec.shape, false); },
                   [&](std::vector<float> LayerWeights::*m) { layer->*m = fetch(full, spec.shape); },
                   [&](float LayerWeights::*m) { layer->*m = fetch(full, spec.shape)[0]; },
                   [&](WeightMatrix ModelWeights::*m) { w.*m = matrix(full, spec.shape, true); },
                   [&](std::vector<float> ModelWeights::*m) { w.*m = fetch(full, spec.shape); },
               },
               spec.slot);
  }
  if (!c.tie_word_embeddings) {
    for (const char* head : {"lm_head.weight", "language_model.lm_head.weight"}) {
      if (store.find(head)) {
        w.lm_head = matrix(head, {c.vocab_size, c.hidden_size}, true);
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
