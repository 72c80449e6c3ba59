#include "media/frontend_weights.h"

#include <cmath>
#include <limits>

#include "core/error.h"
#include "io/safetensors.h"
#include "kernels/block_rows.h"

namespace splitdec {

namespace {

using Kind = FrontendTensor::Kind;

// Adds tensors under a canonical prefix, each also accepted under the alias prefixes.
struct TensorList {
  std::vector<FrontendTensor>& out;
  std::string prefix;
  std::vector<std::string> alias_prefixes;

  FrontendTensor& add(const std::string& leaf, std::vector<int64_t> shape, Kind kind) {
    FrontendTensor t{prefix + leaf, {}, std::move(shape), kind};
    for (const std::string& a : alias_prefixes) t.aliases.push_back(a + leaf);
    out.push_back(std::move(t));
    return out.back();
  }
  void matrix(const std::string& leaf, std::vector<int64_t> shape, WeightMatrix& m, Kind kind = Kind::Matrix) {
    add(leaf, std::move(shape), kind).matrix = &m;
  }
  void values(const std::string& leaf, std::vector<int64_t> shape, std::vector<float>& v, Kind kind) {
    add(leaf, std::move(shape), kind).values = &v;
  }
  void scalar(const std::string& leaf, float& s, Kind kind) { add(leaf, {}, kind).scalar = &s; }
};

void siglip_tensors(const SiglipShape& s, SiglipWeights& w, std::vector<FrontendTensor>& out) {
  const int64_t H = s.hidden, I = s.intermediate, P = s.patch, G = s.grid();
  TensorList tower{out, "model.vision_tower.vision_model.", {"vision_tower.vision_model."}};
  tower.matrix("embeddings.patch_embedding.weight", {H, 3, P, P}, w.patch_embedding);
  tower.values("embeddings.patch_embedding.bias", {H}, w.patch_bias, Kind::Bias);
  tower.values("embeddings.position_embedding.weight", {G * G, H}, w.position_embedding, Kind::Table);
  w.layers.resize(size_t(s.layers));
  for (int i = 0; i < s.layers; ++i) {
    SiglipLayerWeights& L = w.layers[size_t(i)];
    const std::string l = "encoder.layers." + std::to_string(i) + ".";
    tower.values(l + "layer_norm1.weight", {H}, L.ln1_weight, Kind::Gain);
    tower.values(l + "layer_norm1.bias", {H}, L.ln1_bias, Kind::Bias);
    const std::pair<const char*, std::pair<WeightMatrix*, std::vector<float>*>> attn[] = {
        {"q_proj", {&L.q_proj, &L.q_bias}},
        {"k_proj", {&L.k_proj, &L.k_bias}},
        {"v_proj", {&L.v_proj, &L.v_bias}},
        {"out_proj", {&L.out_proj, &L.out_bias}}};
    for (const auto& [name, slot] : attn) {
      tower.matrix(l + "self_attn." + name + ".weight", {H, H}, *slot.first);
      tower.values(l + "self_attn." + name + ".bias", {H}, *slot.second, Kind::Bias);
    }
    tower.values(l + "layer_norm2.weight", {H}, L.ln2_weight, Kind::Gain);
    tower.values(l + "layer_norm2.bias", {H}, L.ln2_bias, Kind::Bias);
    tower.matrix(l + "mlp.fc1.weight", {I, H}, L.fc1);
    tower.values(l + "mlp.fc1.bias", {I}, L.fc1_bias, Kind::Bias);
    tower.matrix(l + "mlp.fc2.weight", {H, I}, L.fc2);
    tower.values(l + "mlp.fc2.bias", {H}, L.fc2_bias, Kind::Bias);
  }
  tower.values("post_layernorm.weight", {H}, w.post_ln_weight, Kind::Gain);
  tower.values("post_layernorm.bias", {H}, w.post_ln_bias, Kind::Bias);
  TensorList projector{out, "model.multi_modal_projector.", {"multi_modal_projector."}};
  projector.values("mm_soft_emb_norm.weight", {H}, w.soft_emb_norm, Kind::GainMinusOne);
  projector.matrix("mm_input_projection_weight", {H, s.text_hidden}, w.projection, Kind::TransposedMatrix);
}

// A Gemma4ClippableLinear: NAME.linear.weight, and with `clipped` its four
// bounds (absent from a checkpoint: infinite, so they do nothing).
void clipped_linear_tensors(TensorList& list, const std::string& name, ClippedLinear& c, int64_t rows, int64_t cols,
                            bool clipped) {
  list.matrix(name + ".linear.weight", {rows, cols}, c.weight);
  if (!clipped) return;
  const float inf = std::numeric_limits<float>::infinity();
  c.clip = ClippedLinear::Bounds{-inf, inf, -inf, inf};
  list.scalar(name + ".input_min", c.clip->input_min, Kind::ClipLow);
  list.scalar(name + ".input_max", c.clip->input_max, Kind::ClipHigh);
  list.scalar(name + ".output_min", c.clip->output_min, Kind::ClipLow);
  list.scalar(name + ".output_max", c.clip->output_max, Kind::ClipHigh);
}

void gemma4_tensors(const Gemma4VisionShape& s, bool clipped, Gemma4VisionWeights& w, std::vector<FrontendTensor>& out) {
  const int64_t H = s.hidden, I = s.intermediate, D = s.head_dim;
  TensorList tower{out, "model.vision_tower.", {}};
  tower.matrix("patch_embedder.input_proj.weight", {H, int64_t(s.patch_dim())}, w.input_proj);
  tower.values("patch_embedder.position_embedding_table", {2, s.positions, H}, w.position_table, Kind::Table);
  w.layers.resize(size_t(s.layers));
  for (int i = 0; i < s.layers; ++i) {
    Gemma4VisionLayerWeights& L = w.layers[size_t(i)];
    const std::string l = "encoder.layers." + std::to_string(i) + ".";
    auto linear = [&](const std::string& name, ClippedLinear& c, int64_t rows, int64_t cols) {
      clipped_linear_tensors(tower, l + name, c, rows, cols, clipped);
    };
    linear("self_attn.q_proj", L.q_proj, s.heads * D, H);
    linear("self_attn.k_proj", L.k_proj, s.kv_heads * D, H);
    linear("self_attn.v_proj", L.v_proj, s.kv_heads * D, H);
    linear("self_attn.o_proj", L.o_proj, H, s.heads * D);
    tower.values(l + "self_attn.q_norm.weight", {D}, L.q_norm, Kind::Gain);
    tower.values(l + "self_attn.k_norm.weight", {D}, L.k_norm, Kind::Gain);
    linear("mlp.gate_proj", L.gate_proj, I, H);
    linear("mlp.up_proj", L.up_proj, I, H);
    linear("mlp.down_proj", L.down_proj, H, I);
    tower.values(l + "input_layernorm.weight", {H}, L.input_norm, Kind::Gain);
    tower.values(l + "post_attention_layernorm.weight", {H}, L.post_attention_norm, Kind::Gain);
    tower.values(l + "pre_feedforward_layernorm.weight", {H}, L.pre_feedforward_norm, Kind::Gain);
    tower.values(l + "post_feedforward_layernorm.weight", {H}, L.post_feedforward_norm, Kind::Gain);
  }
  if (s.standardize) {
    tower.values("std_bias", {H}, w.std_bias, Kind::Bias);
    tower.values("std_scale", {H}, w.std_scale, Kind::Gain);
  }
  TensorList embed{out, "model.embed_vision.", {}};
  embed.matrix("embedding_projection.weight", {s.text_hidden, H}, w.embedding_projection);
}

// Gemma4AudioModel's module tree as Gemma4ForConditionalGeneration saves it
// (model.audio_tower.*), then Gemma4MultimodalEmbedder (model.embed_audio.*).
// Conv and depthwise kernels are Kind::Matrix values: make-model scales them by fan-in.
void conformer_tensors(const ConformerAudioShape& s, bool clipped, ConformerAudioWeights& w, std::vector<FrontendTensor>& out) {
  const int64_t H = s.hidden, c0 = s.channels0, c1 = s.channels1;
  TensorList tower{out, "model.audio_tower.", {}};
  tower.values("subsample_conv_projection.layer0.conv.weight", {c0, 1, 3, 3}, w.conv0, Kind::Matrix);
  tower.values("subsample_conv_projection.layer0.norm.weight", {c0}, w.norm0, Kind::Gain);
  tower.matrix("subsample_conv_projection.layer1.conv.weight", {c1, c0, 3, 3}, w.conv1);
  tower.values("subsample_conv_projection.layer1.norm.weight", {c1}, w.norm1, Kind::Gain);
  tower.matrix("subsample_conv_projection.input_proj_linear.weight", {H, int64_t(s.proj_input())}, w.input_proj);
  w.layers.resize(size_t(s.layers));
  for (int i = 0; i < s.layers; ++i) {
    ConformerLayerWeights& L = w.layers[size_t(i)];
    const std::string l = "layers." + std::to_string(i) + ".";
    auto linear = [&](const std::string& name, ClippedLinear& c, int64_t rows, int64_t cols) {
      clipped_linear_tensors(tower, l + name, c, rows, cols, clipped);
    };
    for (const auto& [name, f] : {std::pair<const char*, ConformerFeedForward*>{"feed_forward1.", &L.ffn1},
                                  std::pair<const char*, ConformerFeedForward*>{"feed_forward2.", &L.ffn2}}) {
      linear(std::string(name) + "ffw_layer_1", f->up, 4 * H, H);
      linear(std::string(name) + "ffw_layer_2", f->down, H, 4 * H);
      tower.values(l + name + "pre_layer_norm.weight", {H}, f->pre_norm, Kind::Gain);
      tower.values(l + name + "post_layer_norm.weight", {H}, f->post_norm, Kind::Gain);
    }
    linear("self_attn.q_proj", L.q_proj, H, H);
    linear("self_attn.k_proj", L.k_proj, H, H);
    linear("self_attn.v_proj", L.v_proj, H, H);
    linear("self_attn.post", L.post, H, H);
    tower.matrix(l + "self_attn.relative_k_proj.weight", {H, H}, L.relative_k_proj);
    tower.values(l + "self_attn.per_dim_scale", {int64_t(s.head_dim())}, L.per_dim_scale, Kind::Bias);
    linear("lconv1d.linear_start", L.linear_start, 2 * H, H);
    linear("lconv1d.linear_end", L.linear_end, H, H);
    tower.values(l + "lconv1d.depthwise_conv1d.weight", {H, 1, int64_t(s.conv_kernel)}, L.depthwise, Kind::Matrix);
    tower.values(l + "lconv1d.pre_layer_norm.weight", {H}, L.conv_pre_norm, Kind::Gain);
    tower.values(l + "lconv1d.conv_norm.weight", {H}, L.conv_norm, Kind::Gain);
    tower.values(l + "norm_pre_attn.weight", {H}, L.norm_pre_attn, Kind::Gain);
    tower.values(l + "norm_post_attn.weight", {H}, L.norm_post_attn, Kind::Gain);
    tower.values(l + "norm_out.weight", {H}, L.norm_out, Kind::Gain);
  }
  tower.matrix("output_proj.weight", {int64_t(s.output_proj_dims), H}, w.output_proj);
  tower.values("output_proj.bias", {int64_t(s.output_proj_dims)}, w.output_bias, Kind::Bias);
  TensorList embed{out, "model.embed_audio.", {}};
  embed.matrix("embedding_projection.weight", {s.text_hidden, int64_t(s.output_proj_dims)}, w.embedding_projection);
}

void unified_tensors(const UnifiedVisionShape& s, UnifiedVisionWeights& w, std::vector<FrontendTensor>& out) {
  const int64_t P = s.patch_dim(), D = s.embed_dim;
  // The converter writes model.vision_embedder.*; HF's module is model.embed_vision.*.
  TensorList e{out, "model.vision_embedder.", {"model.embed_vision."}};
  e.values("patch_ln1.weight", {P}, w.ln1_weight, Kind::Gain);
  e.values("patch_ln1.bias", {P}, w.ln1_bias, Kind::Bias);
  e.matrix("patch_dense.weight", {D, P}, w.dense);
  e.values("patch_dense.bias", {D}, w.dense_bias, Kind::Bias);
  e.values("patch_ln2.weight", {D}, w.ln2_weight, Kind::Gain);
  e.values("patch_ln2.bias", {D}, w.ln2_bias, Kind::Bias);
  e.values("pos_embedding", {s.positions, 2, D}, w.pos_embedding, Kind::Table);
  e.values("pos_norm.weight", {D}, w.pos_norm_weight, Kind::Gain);
  e.values("pos_norm.bias", {D}, w.pos_norm_bias, Kind::Bias);
  TensorList p{out, "model.embed_vision.", {"model.embed_vision.multimodal_embedder."}};
  p.matrix("embedding_projection.weight", {s.text_hidden, D}, w.projection);
}

WeightMatrix load_matrix(const TensorView& v, bool transposed) {
  const bool blocks = v.blocks != BlockType::None;  // an mmproj's quantized matrix [out, in]
  if (!dtype_is_float(v.dtype) && !blocks)
    throw FormatError(v.file + ": tensor '" + v.name + "' is stored as " + dtype_name(v.dtype) +
                      "; the media towers load F32, BF16, F16 or GGUF block weights");
  const int64_t rows = v.shape.empty() ? 1 : v.shape[0];
  const int64_t cols = v.shape.size() == 2 ? v.shape[1] : rows == 0 ? 0 : v.numel() / rows;
  if (blocks && v.shape.size() != 2)
    throw FormatError(v.file + ": tensor '" + v.name + "' is quantized but not a matrix");
  std::vector<float> f;
  if (blocks) {
    // Expanded once to check the blocks' factors; those splitdec runs stay
    // as stored (with f32 activations, as the towers' float weights), the
    // others become f32.
    f.resize(size_t(rows) * size_t(cols));
    expand_block_rows(v.blocks, v.data, rows, cols, f.data());
    for (size_t k = 0; k < f.size(); ++k)
      if (!std::isfinite(f[k]))
        throw FormatError(v.file + ": tensor '" + v.name + "' holds a non-finite value (NaN or Inf) at element " + std::to_string(k));
    const std::optional<WeightFormat> as = weight_format_of_blocks(v.blocks);
    if (!transposed) return as ? WeightMatrix::from_bytes(*as, int(rows), int(cols), v.data)
                               : WeightMatrix::from_f32(WeightFormat::F32, int(rows), int(cols), f.data());
  } else if (!transposed) {
    return WeightMatrix::from_bytes(weight_format_of(v.dtype), int(rows), int(cols), v.data);
  }
  // Stored [in, out] and used as x @ W: keep the nn.Linear [out, in] layout the kernels read.
  if (!blocks) f = v.to_f32();
  std::vector<float> t(f.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t[size_t(c * rows + r)] = f[size_t(r * cols + c)];
  return WeightMatrix::from_f32(blocks ? WeightFormat::F32 : weight_format_of(v.dtype), int(cols), int(rows), t.data());
}

}  // namespace

std::vector<FrontendTensor> frontend_tensors(const FrontendConfig& c, FrontendWeights& w) {
  std::vector<FrontendTensor> out;
  switch (c.vision) {
    case VisionFrontend::None: break;
    case VisionFrontend::Siglip: siglip_tensors(c.siglip, w.siglip, out); break;
    case VisionFrontend::Gemma4Encoder: gemma4_tensors(c.gemma4, c.gemma4_clipped_linears, w.gemma4, out); break;
    case VisionFrontend::UnifiedPatches: unified_tensors(c.unified, w.unified, out); break;
  }
  if (c.audio == AudioFrontend::RawFrames) {
    TensorList a{out, "model.embed_audio.", {"model.embed_audio.multimodal_embedder."}};
    a.matrix("embedding_projection.weight", {c.audio_shape.text_hidden, c.audio_shape.frame}, w.audio_projection);
  } else if (c.audio == AudioFrontend::Conformer) {
    conformer_tensors(c.conformer, c.conformer_clipped_linears, w.conformer, out);
  }
  return out;
}

bool load_frontend_weights(const FrontendConfig& config, const TensorStore& store, FrontendWeights& weights,
                           size_t* bytes) {
  std::vector<FrontendTensor> tensors = frontend_tensors(config, weights);
  auto find = [&](const FrontendTensor& t) -> const TensorView* {
    if (const TensorView* v = store.find(t.name)) return v;
    for (const std::string& a : t.aliases)
      if (const TensorView* v = store.find(a)) return v;
    return nullptr;
  };
  bool any = false;
  for (const FrontendTensor& t : tensors) any = any || find(t) != nullptr;
  if (!any) return false;
  for (const FrontendTensor& t : tensors) {
    const TensorView* v = find(t);
    if (v == nullptr) {
      std::string names = "'" + t.name + "'";
      for (const std::string& a : t.aliases) names += " or '" + a + "'";
      throw FormatError(store.describe() + ": the media frontend needs tensor " + names + " " + shape_text(t.shape) +
                        ", which the checkpoint does not have");
    }
    const bool scalar = t.scalar != nullptr;
    const bool shape_ok = scalar ? v->numel() == 1 && v->shape.size() <= 1 : v->shape == t.shape;
    if (!shape_ok)
      throw FormatError(v->file + ": tensor '" + v->name + "' has shape " + shape_text(v->shape) + ", expected " +
                        (scalar ? std::string("a scalar") : shape_text(t.shape)));
    // A clip bound of +-inf is HF's own default (Gemma4ClippableLinear's
    // buffers): no clamp on that side. Anything else non-finite is caught by
    // name now, not as garbage rows later.
    const bool bound = t.kind == Kind::ClipLow || t.kind == Kind::ClipHigh;
    if (bound && !std::isnan(v->to_f32()[0])) {
    } else if (const int64_t bad = v->first_non_finite(); bad >= 0) {
      throw FormatError(v->file + ": tensor '" + v->name + "' holds a non-finite value (NaN or Inf) at element " +
                        std::to_string(bad));
    }
    if (t.matrix) {
      *t.matrix = load_matrix(*v, t.kind == Kind::TransposedMatrix);
      if (bytes) *bytes += t.matrix->bytes();
    } else if (t.values) {
      *t.values = v->to_f32();
      if (bytes) *bytes += t.values->size() * sizeof(float);
    } else {
      *t.scalar = v->to_f32()[0];
    }
    store.release(*v);  // copied out: the file's pages need not stay resident
  }
  return true;
}

}  // namespace splitdec
