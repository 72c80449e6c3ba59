#include "model/weights.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "core/error.h"
#include "core/named_values.h"
#include "core/machine.h"
#include "core/thread_pool.h"
#include "io/ggml_block_formats.h"
#include "io/safetensors.h"
#include "kernels/block_rows.h"
#include "core/env_switch.h"
#include "model/quantized_tensors.h"

namespace splitdec {

namespace {
std::string layer_name(int i, const std::string& leaf) { return "layers." + std::to_string(i) + "." + leaf; }
template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
}  // namespace

MappedTable::MappedTable(std::shared_ptr<const TensorStore> store, const TensorView* view)
    : store_(std::move(store)), view_(view) {
  std::string path;
  if (!store_->file_position(*view_, &path, &offset_)) return;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw FormatError(path + ": cannot open for reading tensor '" + view_->name + "': " + std::strerror(errno));
  fd_ = std::shared_ptr<const int>(new int(fd), [](const int* p) {
    ::close(*p);
    delete p;
  });
}

int64_t MappedTable::rows() const { return view_ ? view_->shape[0] : 0; }
int64_t MappedTable::cols() const { return view_ ? view_->shape[1] : 0; }
DType MappedTable::dtype() const { return view_ ? view_->dtype : DType::F32; }

// A GGUF's table may be blocks (llama-quantize gives it the token
// embedding's type): expanded a row at a time.
void MappedTable::row_f32(int64_t r, float* dst) const {
  const size_t n = size_t(cols()), esize = dtype_size(view_->dtype);
  const bool blocks = view_->blocks != BlockType::None;
  const size_t bytes = blocks ? block_row_bytes(view_->blocks, n) : n * esize;
  const uint8_t* src = view_->data + size_t(r) * bytes;
  thread_local std::vector<uint8_t> buffer;
  if (fd_) {
    buffer.resize(bytes);
    size_t got = 0;
    while (got < bytes) {
      const ssize_t k = ::pread(*fd_, buffer.data() + got, bytes - got, off_t(offset_ + uint64_t(r) * bytes + got));
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0)
        throw FormatError(view_->file + ": tensor '" + view_->name + "': row " + std::to_string(r) + " cannot be read (" +
                          (k < 0 ? std::string(std::strerror(errno)) : std::string("the file is shorter than its header says")) +
                          ")");
      got += size_t(k);
    }
    src = buffer.data();
  }
  if (blocks) expand_block_rows(view_->blocks, src, 1, int64_t(n), dst);
  else
    for (size_t i = 0; i < n; ++i) dst[i] = load_as_f32(view_->dtype, src + i * esize);
  // Read in place, so checked as read (the loader checks what it copies).
  for (size_t i = 0; i < n; ++i)
    if (!std::isfinite(dst[i]))
      throw FormatError(view_->file + ": tensor '" + view_->name + "' holds a non-finite value (NaN or Inf) in row " +
                        std::to_string(r));
}

namespace {
constexpr NamedValue<WeightStorage> kWeightStorages[] = {{WeightStorage::Checkpoint, "checkpoint"},
                                                          {WeightStorage::Q8, "q8"},
                                                          {WeightStorage::Q4, "q4"},
                                                          {WeightStorage::Q8F32Act, "q8-f32act"},
                                                          {WeightStorage::Q4F32Act, "q4-f32act"}};
}  // namespace

WeightStorage parse_weight_storage(const std::string& name) {
  if (name.empty()) return WeightStorage::Checkpoint;
  return parse_named(kWeightStorages, name, "weights format",
                     ": checkpoint keeps the stored formats; q8 is 8-bit blocks, q4 4-bit blocks with an 8-bit embedding, "
                     "both with int8 activations in decode; -f32act keeps f32 activations");
}

const char* weight_storage_name(WeightStorage storage) { return name_of(kWeightStorages, storage); }

WeightLoading weight_loading(WeightStorage storage) {
  WeightLoading w;
  w.f32_activations = storage == WeightStorage::Q8F32Act || storage == WeightStorage::Q4F32Act;
  if (storage == WeightStorage::Q8 || storage == WeightStorage::Q8F32Act) {
    w.format = WeightFormat::Q8_0;
  } else if (storage == WeightStorage::Q4 || storage == WeightStorage::Q4F32Act) {
    w.format = WeightFormat::Q4_0;
    w.embedding_format = WeightFormat::Q8_0;
  }
  return w;
}

WeightLoading weight_loading_named(const std::string& name) { return weight_loading(parse_weight_storage(name)); }

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
    if (spec.num_experts > 0) {
      const int64_t E = spec.num_experts, X = spec.expert_intermediate_size;
      add("router.proj.weight", {E, H}, WeightSpec::Router, &L::router);
      add("router.scale", {H}, WeightSpec::Norm, &L::router_scale);
      add("router.per_expert_scale", {E}, WeightSpec::Norm, &L::per_expert_scale);
      add("experts.gate_up_proj", {E, 2 * X, H}, WeightSpec::Experts, &L::expert_gate_up);
      add("experts.down_proj", {E, H, X}, WeightSpec::Experts, &L::expert_down);
      add("pre_feedforward_layernorm_2.weight", {H}, WeightSpec::Norm, &L::pre_feedforward_norm_2);
      add("post_feedforward_layernorm_1.weight", {H}, WeightSpec::Norm, &L::post_feedforward_norm_1);
      add("post_feedforward_layernorm_2.weight", {H}, WeightSpec::Norm, &L::post_feedforward_norm_2);
    }
    if (c.per_layer_dim > 0) {
      const int64_t P = c.per_layer_dim;
      add("per_layer_input_gate.weight", {P, H}, WeightSpec::Linear, &L::per_layer_input_gate);
      add("per_layer_projection.weight", {H, P}, WeightSpec::Linear, &L::per_layer_projection);
      add("post_per_layer_input_norm.weight", {H}, WeightSpec::Norm, &L::post_per_layer_input_norm);
    }
    if (spec.layer_scalar) {
      add("layer_scalar", {1}, WeightSpec::Scalar, &L::layer_scalar);
      s.back().optional = true;  // an HF buffer some checkpoints omit; default 1
    }
  }
  if (c.per_layer_dim > 0) {
    const int64_t LP = int64_t(c.num_layers) * c.per_layer_dim;
    s.push_back({"embed_tokens_per_layer.weight", {c.per_layer_vocab, LP}, WeightSpec::MappedTable, -1,
                 &ModelWeights::per_layer_table});
    s.push_back({"per_layer_model_projection.weight", {LP, H}, WeightSpec::Linear, -1,
                 &ModelWeights::per_layer_model_projection});
    s.push_back({"per_layer_projection_norm.weight", {c.per_layer_dim}, WeightSpec::Norm, -1,
                 &ModelWeights::per_layer_projection_norm});
  }
  s.push_back({"norm.weight", {H}, WeightSpec::Norm, -1, &ModelWeights::final_norm});
  return s;
}


std::map<std::string, bool> decoder_matrix_names(const ModelConfig& c, const std::string& prefix) {
  std::map<std::string, bool> out;
  for (const WeightSpec& s : decoder_weight_specs(c))
    if (s.kind == WeightSpec::Linear || s.kind == WeightSpec::Embedding || s.kind == WeightSpec::Experts)
      out[prefix + s.name] = s.kind == WeightSpec::Embedding;
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

namespace {

// What such blocks are stored as: the --weights format when one is asked
// for, else Q8_0 (within 0.4% of the block's largest value of what the
// file holds; a 4-bit target would round 4-bit values again).
WeightFormat converted_format(const WeightLoading& loading, bool embedding, int in) {
  const std::optional<WeightFormat> f = embedding && loading.embedding_format ? loading.embedding_format : loading.format;
  return f && weight_format_fits(*f, in) ? *f : WeightFormat::Q8_0;
}

// Rows [r0, r0 + rows) of blocks `v` (`g` blocks, rows of `in`) into `dst`.
void convert_block_rows(const TensorStore& store, const TensorView& v, GgmlBlocks g, int in, int r0, int rows, WeightMatrix& dst) {
  const size_t row_bytes = size_t(in / ggml_block_layout(g).values) * ggml_block_layout(g).bytes;
  TensorView piece = v;
  piece.data = v.data + size_t(r0) * row_bytes;
  piece.nbytes = size_t(rows) * row_bytes;
  std::vector<float> f32(size_t(rows) * size_t(in));
  ThreadPool::global()->parallel_for(rows, [&](int64_t a, int64_t b) {
    for (int64_t r = a; r < b; ++r) dequantize_ggml_blocks(g, piece.data + size_t(r) * row_bytes, f32.data() + size_t(r) * size_t(in), in);
  });
  for (size_t i = 0; i < f32.size(); ++i)
    if (!std::isfinite(f32[i]))
      throw FormatError(v.file + ": tensor '" + v.name + "' holds a non-finite value (NaN or Inf) at element " +
                        std::to_string(int64_t(r0) * in + int64_t(i)));
  ThreadPool::global()->parallel_for(rows, [&](int64_t a, int64_t b) {
    dst.set_rows_f32(r0 + int(a), int(b - a), f32.data() + size_t(a) * size_t(in));
  });
  store.release(piece);
}

}  // namespace

ModelWeights load_weights(const ModelConfig& c, const std::shared_ptr<const TensorStore>& shared_store,
                          const std::function<void(size_t, size_t)>& progress, const WeightLoading& loading) {
  const TensorStore& store = *shared_store;
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
  // The format a GGUF's blocks run in as they are: Q8_0 and Q4_0 always
  // (splitdec's own), the K-quants Q4_K, Q5_K, Q6_K unless --weights asks for another
  // format; none for the other blocks (converted) and for float tensors.
  auto runs_as_stored = [&](const TensorView& v, bool embedding) -> std::optional<WeightFormat> {
    const std::optional<WeightFormat> f = weight_format_of_blocks(v.blocks);
    const bool k_quant = f && weight_block_values(*f) == 256;
    if (k_quant && (embedding && loading.embedding_format ? loading.embedding_format : loading.format)) return std::nullopt;
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
  // `name`: the tensor as the file holds it, read as [out, in] (an expert
  // stack [E, out, in] as E * out rows).
  auto matrix_read = [&](const std::string& name, const std::vector<int64_t>& shape, int out, int in, bool embedding) {
    const TensorView& stored = store.get(name);
    if (const std::optional<WeightFormat> f = runs_as_stored(stored, embedding)) {  // a GGUF's blocks, copied as they are
      const TensorView& v = view(name, shape);
      if (!weight_format_fits(*f, in) || size_t(out) * weight_row_bytes(*f, in) != v.nbytes)
        throw FormatError(v.file + ": tensor '" + v.name + "' holds " + std::to_string(v.nbytes) + " bytes, not " +
                          weight_format_name(*f) + " rows of " + std::to_string(in));
      WeightMatrix m = WeightMatrix::zeros(*f, out, in);
      store.copy_out(v, m.data.data());
      std::string type = weight_format_name(*f);  // as llama.cpp names it: Q8_0, Q4_K
      std::transform(type.begin(), type.end(), type.begin(), [](unsigned char ch) { return char(std::toupper(ch)); });
      const std::string what = v.file + ": tensor '" + v.name + "' (" + type + ")";
      if (*f == WeightFormat::Q8_0) check_q8_0_values(m.data.data(), size_t(out) * size_t(in / 32), what);
      if (weight_block_values(*f) == 256) check_k_quant_factors(*f, m.data.data(), size_t(out) * size_t(in / 256), what);
      m.int8_activations = !loading.f32_activations;
      return m;
    }
    if (GgmlBlocks g; ggml_blocks_of(stored.blocks, &g)) {  // blocks without kernels here: converted
      const TensorView& v = view(name, shape);
      const GgmlBlockLayout& l = ggml_block_layout(g);
      if (in % l.values != 0 || size_t(out) * size_t(in / l.values) * l.bytes != v.nbytes)
        throw FormatError(v.file + ": tensor '" + v.name + "' holds " + std::to_string(v.nbytes) + " bytes, not " + l.name +
                          " rows of " + std::to_string(in));
      WeightMatrix m = WeightMatrix::zeros(converted_format(loading, embedding, in), out, in);
      m.int8_activations = !loading.f32_activations;
      for (int r0 = 0, step = convert_piece_rows(in); r0 < out; r0 += step)
        convert_block_rows(store, v, g, in, r0, std::min(step, out - r0), m);
      return m;
    }
    if (!dtype_is_float(stored.dtype)) {  // quantized in the file: its own shape rules
      WeightMatrix m = load_quantized_matrix(store, stored, out, in);
      m.int8_activations = !loading.f32_activations;
      return m;
    }
    TensorView v = view(name, shape);
    v.shape = {out, in};
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
  // Block rows (Q4_0 / Q8_0 / K-quants) in groups of 16 for the decode kernels (WeightMatrix::grouped_rows);
  // SPLITDEC_ROW_GROUPS=0 keeps them as stored (to measure one against the other).
  static const bool group_blocks = env_switch_on("SPLITDEC_ROW_GROUPS");
  auto grouped = [&](WeightMatrix m) {
    if (group_blocks) m.group_rows();
    return m;
  };
  auto matrix_from = [&](const std::string& name, const std::vector<int64_t>& shape, int out, int in, bool embedding) {
    return grouped(matrix_read(name, shape, out, in, embedding));
  };
  auto matrix = [&](const std::string& name, const std::vector<int64_t>& shape, bool embedding) {
    return matrix_from(name, shape, int(shape[0]), int(shape[1]), embedding);
  };
  auto matrix_as_stored = [&](const std::string& name, const std::vector<int64_t>& shape) {
    const TensorView& stored = store.get(name);
    if (!dtype_is_float(stored.dtype) || stored.blocks != BlockType::None)  // a file that quantized it: as it is
      return matrix_from(name, shape, int(shape[0]), int(shape[1]), false);
    const TensorView& v = view(name, shape);
    WeightMatrix m = WeightMatrix::zeros(weight_format_of(v.dtype), int(shape[0]), int(shape[1]));
    store.copy_out(v, m.data.data());
    check_finite(v, m.data.data());
    return m;
  };
  // An expert stack [E, out, in]: read whole, then cut into one matrix per
  // expert, so that a token's step reads only its experts' rows.
  auto experts = [&](const std::string& name, const std::vector<int64_t>& shape) {
    if (shape[0] * shape[1] > (int64_t(1) << 30))
      throw FormatError("tensor '" + name + "' " + shape_text(shape) + " has more than 2^30 rows");
    const int E = int(shape[0]), out = int(shape[1]), in = int(shape[2]);
    const WeightMatrix all = matrix_read(name, shape, E * out, in, false);
    std::vector<WeightMatrix> each(static_cast<size_t>(E));
    for (int e = 0; e < E; ++e) {
      each[size_t(e)] = WeightMatrix::from_bytes(all.format, out, in, all.row(e * out));
      each[size_t(e)].int8_activations = all.int8_activations;
      each[size_t(e)] = grouped(std::move(each[size_t(e)]));
    }
    return each;
  };
  // Weights are copied out of the mapped files into memory: weights larger
  // than the machine are refused before any copy (counted as they will be
  // stored: a matrix converted to `loading.format` at its new size).
  // Only the decoder's matrices convert; media towers load as stored.
  const std::map<std::string, bool> converted = decoder_matrix_names(c, prefix);
  std::set<std::string> mapped;  // left in the file, not copied
  for (const WeightSpec& spec : decoder_weight_specs(c))
    if (spec.kind == WeightSpec::MappedTable) mapped.insert(prefix + spec.name);
  size_t total = 0;
  for (const auto& [name, v] : store.tensors()) {
    if (mapped.count(name)) continue;
    const auto it = converted.find(name);
    TensorView flat = v;  // an expert stack [E, out, in] converts as E * out rows
    if (v.shape.size() == 3) flat.shape = {v.shape[0] * v.shape[1], v.shape[2]};
    const std::optional<WeightFormat> to = it == converted.end() ? std::nullopt : target(flat, it->second);
    const bool embedding = it != converted.end() && it->second;
    if (GgmlBlocks g; flat.shape.size() == 2 && ggml_blocks_of(v.blocks, &g) && !runs_as_stored(v, embedding)) {
      const WeightFormat as = converted_format(loading, embedding, int(flat.shape[1]));
      total += size_t(flat.shape[0]) * weight_row_bytes(as, int(flat.shape[1]));
    } else {
      total += to ? size_t(flat.shape[0]) * weight_row_bytes(*to, int(flat.shape[1])) : v.nbytes;
    }
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
                   [&](WeightMatrix LayerWeights::*m) {
                     // The router stays as stored: its top-k is a discrete choice
                     // that rounding would flip (llama.cpp keeps it float too).
                     layer->*m = spec.kind == WeightSpec::Router ? matrix_as_stored(full, spec.shape)
                                                                 : matrix(full, spec.shape, false);
                   },
                   [&](std::vector<float> LayerWeights::*m) { layer->*m = fetch(full, spec.shape); },
                   [&](float LayerWeights::*m) { layer->*m = fetch(full, spec.shape)[0]; },
                   [&](std::vector<WeightMatrix> LayerWeights::*m) { layer->*m = experts(full, spec.shape); },
                   [&](WeightMatrix ModelWeights::*m) {
                     w.*m = matrix(full, spec.shape, spec.kind == WeightSpec::Embedding);
                   },
                   [&](std::vector<float> ModelWeights::*m) { w.*m = fetch(full, spec.shape); },
                   [&](MappedTable ModelWeights::*m) {
                     const TensorView& v = view(full, spec.shape);
                     // Float, or a GGUF's blocks (whole blocks per row: the container checked).
                     if (!dtype_is_float(v.dtype) && v.blocks == BlockType::None)
                       throw FormatError(v.file + ": tensor '" + full + "' is " + dtype_name(v.dtype) +
                                         "; the per-layer table is read in place and must be f32, bf16, f16 or GGUF blocks");
                     w.*m = MappedTable(shared_store, &v);
                   },
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
  size_t b = embed_tokens.bytes() + lm_head.bytes() + final_norm.size() * 4 + per_layer_model_projection.bytes();
  for (const LayerWeights& L : layers) {
    for (const WeightMatrix* m : {&L.q_proj, &L.k_proj, &L.v_proj, &L.o_proj, &L.gate_proj, &L.up_proj, &L.down_proj,
                                  &L.per_layer_input_gate, &L.per_layer_projection, &L.router})
      b += m->bytes();
    for (const auto* stack : {&L.expert_gate_up, &L.expert_down})
      for (const WeightMatrix& m : *stack) b += m.bytes();
  }
  return b;  // the mapped per-layer table is not resident
}

}  // namespace splitdec
