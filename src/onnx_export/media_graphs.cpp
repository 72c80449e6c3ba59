#include "onnx_export/media_graphs.h"

#include <cmath>
#include <tuple>

#include "core/error.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "onnx_export/onnx_graph.h"

namespace splitdec::onnx_export {

namespace {

constexpr int kFloat = onnx::TensorProto::FLOAT;
constexpr int kInt64 = onnx::TensorProto::INT64;

// The row operators the frontends share, as graph nodes. Weight names get
// `prefix` ("vision." / "speech."), which keeps them apart from the decoder's
// in the shared weights file.
class MediaWriter {
 public:
  MediaWriter(GraphBuilder& g, std::string prefix) : g_(g), prefix_(std::move(prefix)) {}

  GraphBuilder& g() { return g_; }

  std::string values(const std::string& name, const std::vector<float>& v) {
    return g_.weight(prefix_ + name, {int64_t(v.size())}, [&v] { return v; });
  }

  // x W^T: W stored transposed ([in, out]) so that MatMul broadcasts over leading dims.
  std::string linear(const std::string& x, const WeightMatrix& w, const std::string& name) {
    return g_.op("MatMul", {x, g_.weight(prefix_ + name + ".weight_t", {w.in, w.out}, [&w] {
                              std::vector<float> t(size_t(w.out) * size_t(w.in)), row(size_t(w.in));
                              for (int o = 0; o < w.out; ++o) {
                                w.row_f32(o, row.data());
                                for (int i = 0; i < w.in; ++i) t[size_t(i) * size_t(w.out) + size_t(o)] = row[size_t(i)];
                              }
                              return t;
                            })});
  }
  std::string linear(const std::string& x, const WeightMatrix& w, const std::vector<float>& bias, const std::string& name) {
    return g_.op("Add", {linear(x, w, name), values(name + ".bias", bias)});
  }

  // nn.LayerNorm over the last axis, affine.
  std::string layer_norm(const std::string& x, const std::vector<float>& w, const std::vector<float>& b, float eps,
                         const std::string& name) {
    return g_.op("LayerNormalization", {x, values(name + ".weight", w), values(name + ".bias", b)},
                 {{"axis", int64_t(-1)}, {"epsilon", eps}});
  }

  // x / sqrt(mean(x^2) + eps), times a weight when given (already in the
  // form it multiplies by: a Gemma (1 + w) is folded by the caller).
  std::string rms_norm(const std::string& x, float eps, const std::vector<float>* weight = nullptr,
                       const std::string& name = "") {
    const std::string ms = g_.op("ReduceMean", {g_.op("Mul", {x, x}), g_.const_i64(-1)}, {{"keepdims", int64_t(1)}});
    const std::string y = g_.op("Div", {x, g_.op("Sqrt", {g_.op("Add", {ms, g_.scalar_f32(eps)})})});
    return weight == nullptr ? y : g_.op("Mul", {y, values(name, *weight)});
  }


  // Columns 0 and 1 of positions [N, 2]: x and y, [N] each.
  std::pair<std::string, std::string> positions(const std::string& positions = media_names::kImagePositionIds) {
    auto column = [&](int64_t c) { return g_.op("Gather", {positions, g_.scalar_i64(c)}, {{"axis", int64_t(1)}}); };
    return {column(0), column(1)};
  }

 private:
  GraphBuilder& g_;
  std::string prefix_;
};

std::vector<float> plus_one(const std::vector<float>& w) {
  std::vector<float> out = w;
  for (float& v : out) v += 1.f;
  return out;
}

// gemma4_unified (section 3.3): LN1 -> dense + bias -> LN2 -> + pos[x, 0] +
// pos[y, 1] (none for padding) -> pos_norm -> weightless RMSNorm -> projection.
void build_unified_vision(const UnifiedVisionShape& s, const UnifiedVisionWeights& w, GraphBuilder& g) {
  const int64_t P = s.patch_dim(), D = s.embed_dim;
  g.input(media_names::kPixelValues, kFloat, {std::string("num_patches"), P});
  g.input(media_names::kImagePositionIds, kInt64, {std::string("num_patches"), int64_t(2)});
  g.output(media_names::kImageFeatures, kFloat, {std::string("num_patches"), int64_t(w.projection.out)});
  MediaWriter m(g, "vision.");

  std::string h = m.layer_norm(media_names::kPixelValues, w.ln1_weight, w.ln1_bias, s.layer_norm_eps, "patch_ln1");
  h = m.linear(h, w.dense, w.dense_bias, "patch_dense");
  h = m.layer_norm(h, w.ln2_weight, w.ln2_bias, s.layer_norm_eps, "patch_ln2");

  // The table [positions, 2, D] read as [2 * positions, D]: row 2x + 0 by x, 2y + 1 by y.
  // A padding patch ((-1, -1), as HF pads) gets no position row; an index
  // past the table is an error of ONNX Runtime's Gather, never a wrong row.
  const auto [x, y] = m.positions();
  const std::string zero = g.scalar_i64(0);
  const std::string valid = g.op("And", {g.op("GreaterOrEqual", {x, zero}), g.op("GreaterOrEqual", {y, zero})});
  const std::string ix = g.op("Where", {valid, g.op("Mul", {x, g.scalar_i64(2)}), zero});
  const std::string iy = g.op("Where", {valid, g.op("Add", {g.op("Mul", {y, g.scalar_i64(2)}), g.scalar_i64(1)}), zero});
  const std::string table = g.weight("vision.pos_embedding", {2 * int64_t(s.positions), D}, [&w] { return w.pos_embedding; });
  std::string pos = g.op("Add", {g.op("Gather", {table, ix}), g.op("Gather", {table, iy})});
  pos = g.op("Mul", {pos, g.op("Unsqueeze", {g.op("Cast", {valid}, {{"to", int64_t(kFloat)}}), g.const_i64(-1)})});
  h = g.op("Add", {h, pos});

  h = m.layer_norm(h, w.pos_norm_weight, w.pos_norm_bias, s.layer_norm_eps, "pos_norm");
  h = m.rms_norm(h, s.rms_norm_eps);
  g.node_named("Identity", {m.linear(h, w.projection, "embedding_projection")}, {media_names::kImageFeatures});
}

// Gemma-3 (section 1.3): the patch Conv2d + positions -> pre-LN layers with
// bidirectional multi-head attention -> post LN -> pool x pool AveragePool ->
// RMSNorm (1 + w) -> x @ W.
void build_siglip(const SiglipShape& s, const SiglipWeights& w, GraphBuilder& g) {
  const int64_t H = s.hidden, G = s.grid(), N = G * G, P = s.patch, heads = s.heads, hd = s.head_dim;
  const int64_t side = G / s.pool, T = side * side;
  g.input(media_names::kPixelValues, kFloat, {std::string("num_images"), int64_t(3), int64_t(s.image_size), int64_t(s.image_size)});
  g.output(media_names::kImageFeatures, kFloat, {std::string("num_images"), T, int64_t(w.projection.out)});
  MediaWriter m(g, "vision.");

  // The OIHW conv weight is the patch matrix [H, 3 * P * P] in (c, ky, kx) order.
  const std::string kernel = g.weight("vision.patch_embedding.weight", {H, 3, P, P}, [&w] {
    std::vector<float> t(size_t(w.patch_embedding.out) * size_t(w.patch_embedding.in));
    for (int o = 0; o < w.patch_embedding.out; ++o) w.patch_embedding.row_f32(o, t.data() + size_t(o) * w.patch_embedding.in);
    return t;
  });
  std::string h = g.op("Conv", {media_names::kPixelValues, kernel, m.values("patch_embedding.bias", w.patch_bias)},
                       {{"kernel_shape", std::vector<int64_t>{P, P}}, {"strides", std::vector<int64_t>{P, P}}});
  // [B, H, G, G] -> [B, N, H], patches row-major.
  h = g.op("Transpose", {g.op("Reshape", {h, g.const_i64({0, H, N}, {3})})}, {{"perm", std::vector<int64_t>{0, 2, 1}}});
  h = g.op("Add", {h, g.weight("vision.position_embedding", {N, H}, [&w] { return w.position_embedding; })});

  const float eps = s.layer_norm_eps;
  const std::string split_heads = g.const_i64({0, 0, heads, hd}, {4});
  auto heads_first = [&](const std::string& x) {
    return g.op("Transpose", {g.op("Reshape", {x, split_heads})}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  };
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const SiglipLayerWeights& l = w.layers[i];
    const std::string p = "layers." + std::to_string(i);
    g.set_scope("vision/" + p);
    // x += out_proj(MHA(LN1(x))): every patch sees every patch.
    const std::string a = m.layer_norm(h, l.ln1_weight, l.ln1_bias, eps, p + ".layer_norm1");
    const std::string q = heads_first(m.linear(a, l.q_proj, l.q_bias, p + ".q_proj"));
    const std::string k = heads_first(m.linear(a, l.k_proj, l.k_bias, p + ".k_proj"));
    const std::string v = heads_first(m.linear(a, l.v_proj, l.v_bias, p + ".v_proj"));
    std::string y = g.node("Attention", {q, k, v}, 1, {{"scale", float(1.0 / std::sqrt(double(hd)))}})[0];
    y = g.op("Reshape", {g.op("Transpose", {y}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}}), g.const_i64({0, 0, H}, {3})});
    h = g.op("Add", {h, m.linear(y, l.out_proj, l.out_bias, p + ".out_proj")});
    // x += fc2(gelu_tanh(fc1(LN2(x))))
    const std::string b = m.layer_norm(h, l.ln2_weight, l.ln2_bias, eps, p + ".layer_norm2");
    h = g.op("Add", {h, m.linear(g.gelu_tanh(m.linear(b, l.fc1, l.fc1_bias, p + ".fc1")), l.fc2, l.fc2_bias, p + ".fc2")});
  }
  g.set_scope("vision/projector");
  h = m.layer_norm(h, w.post_ln_weight, w.post_ln_bias, eps, "post_layernorm");

  // [B, N, H] -> [B, H, G, G] -> AveragePool -> [B, H, side, side] -> [B, T, H].
  h = g.op("Reshape", {g.op("Transpose", {h}, {{"perm", std::vector<int64_t>{0, 2, 1}}}), g.const_i64({0, H, G, G}, {4})});
  h = g.op("AveragePool", {h}, {{"kernel_shape", std::vector<int64_t>{s.pool, s.pool}}, {"strides", std::vector<int64_t>{s.pool, s.pool}}});
  h = g.op("Transpose", {g.op("Reshape", {h, g.const_i64({0, H, T}, {3})})}, {{"perm", std::vector<int64_t>{0, 2, 1}}});
  // Gemma3RMSNorm scales by (1 + w); an mmproj's is stored as 1 + w already.
  const std::vector<float> norm = w.soft_emb_norm_adds_one ? plus_one(w.soft_emb_norm) : w.soft_emb_norm;
  h = m.rms_norm(h, eps, &norm, "mm_soft_emb_norm.weight_plus_one");
  g.node_named("Identity", {m.linear(h, w.projection, "mm_input_projection")}, {media_names::kImageFeatures});
  g.set_scope("");
}

// The value names of a graph that encodes one image.
struct OneImageNames {
  std::string pixels = media_names::kPixelValues, positions = media_names::kImagePositionIds,
              features = media_names::kImageFeatures;
};

// Gemma-4's vision encoder (section 2.3), on the patches of one image and
// their positions; padding patches ((-1, -1)) are masked out as keys and
// belong to no pooled bin.
class Gemma4EncoderWriter {
 public:
  Gemma4EncoderWriter(const Gemma4VisionShape& s, const Gemma4VisionWeights& w, GraphBuilder& g, OneImageNames names = {})
      : s_(s), w_(w), g_(g), m_(g, "vision."), names_(std::move(names)) {}

  void build() {
    const int64_t H = s_.hidden;
    g_.input(names_.pixels, kFloat, {std::string("num_patches"), int64_t(s_.patch_dim())});
    g_.input(names_.positions, kInt64, {std::string("num_patches"), int64_t(2)});
    g_.output(names_.features, kFloat, {std::string("num_soft_tokens"), int64_t(w_.embedding_projection.out)});
    const std::string zero = g_.scalar_i64(0);
    std::tie(x_, y_) = m_.positions(names_.positions);
    valid_ = g_.op("And", {g_.op("GreaterOrEqual", {x_, zero}), g_.op("GreaterOrEqual", {y_, zero})});
    x_ = g_.op("Where", {valid_, x_, zero});  // clamp(position, 0), as HF does before the table
    y_ = g_.op("Where", {valid_, y_, zero});

    // 2 (x - 0.5) -> input_proj, + table[0][x] + table[1][y] (zero for padding).
    const std::string pixels = g_.op("Mul", {g_.op("Sub", {names_.pixels, g_.scalar_f32(0.5f)}), g_.scalar_f32(2.f)});
    std::string h = m_.linear(pixels, w_.input_proj, "patch_embedder.input_proj");
    // One table per axis, so that a position past the table is an error of
    // ONNX Runtime's Gather rather than a row of the other axis.
    auto axis_table = [&](int axis) {
      return g_.weight("vision.position_embedding_table." + std::string(axis == 0 ? "x" : "y"), {int64_t(s_.positions), H},
                       [this, axis] {
                         const auto begin = w_.position_table.begin() + std::ptrdiff_t(axis) * s_.positions * s_.hidden;
                         return std::vector<float>(begin, begin + std::ptrdiff_t(s_.positions) * s_.hidden);
                       });
    };
    std::string pos = g_.op("Add", {g_.op("Gather", {axis_table(0), x_}), g_.op("Gather", {axis_table(1), y_})});
    valid_f_ = g_.op("Unsqueeze", {g_.op("Cast", {valid_}, {{"to", int64_t(kFloat)}}), g_.const_i64(-1)});  // [N, 1]
    h = g_.op("Add", {h, g_.op("Mul", {pos, valid_f_})});

    rope_tables();
    // Padding keys are invisible: [1, 1, N, N], true where the key is a real patch.
    const std::string n = g_.op("Shape", {names_.pixels}, {{"end", int64_t(1)}});
    const std::string keys = g_.op("Reshape", {valid_, g_.const_i64({1, 1, 1, -1}, {4})});
    mask_ = g_.op("Expand", {keys, g_.op("Concat", {g_.const_i64({1, 1}, {2}), n, n}, {{"axis", int64_t(0)}})});

    for (size_t i = 0; i < w_.layers.size(); ++i) {
      g_.set_scope("vision/layers." + std::to_string(i));
      h = layer(int(i), h);
    }
    g_.set_scope("vision/pooler");
    g_.node_named("Identity", {pool_and_project(h)}, {names_.features});
    g_.set_scope("");
  }

 private:
  std::string clipped(const std::string& x, const ClippedLinear& c, const std::string& name) {
    if (!c.clip) return m_.linear(x, c.weight, name);
    const ClippedLinear::Bounds b = *c.clip;
    const std::string in = g_.op("Clip", {x, g_.scalar_f32(b.input_min), g_.scalar_f32(b.input_max)});
    return g_.op("Clip", {m_.linear(in, c.weight, name), g_.scalar_f32(b.output_min), g_.scalar_f32(b.output_max)});
  }

  // cos / sin [N, 1, hd / 4] by x and by y: inv_freq over each axis' half of the head.
  void rope_tables() {
    const int quarter = s_.head_dim / 4, spatial = s_.head_dim / 2;
    std::vector<float> inv_freq(static_cast<size_t>(quarter));
    for (int k = 0; k < quarter; ++k) inv_freq[size_t(k)] = float(1.0 / std::pow(s_.rope_theta, double(2 * k) / spatial));
    const std::string freq = g_.const_f32(inv_freq, {quarter});
    auto angle = [&](const std::string& p) {
      // [N] -> [N, 1, 1] * [quarter]: the angle in f32, as HF forms it.
      return g_.op("Mul", {g_.op("Unsqueeze", {g_.op("Cast", {p}, {{"to", int64_t(kFloat)}}), g_.const_i64({1, 2}, {2})}), freq});
    };
    const std::string ax = angle(x_), ay = angle(y_);
    cos_x_ = g_.op("Cos", {ax}), sin_x_ = g_.op("Sin", {ax});
    cos_y_ = g_.op("Cos", {ay}), sin_y_ = g_.op("Sin", {ay});
  }

  // x: [N, heads, hd]. rotate_half over the first half of each head by x, the second by y.
  std::string rope(const std::string& x) {
    const int64_t q = s_.head_dim / 4;
    const std::string parts = g_.const_i64({q, q, q, q}, {4});
    const auto p = g_.node("Split", {x, parts}, 4, {{"axis", int64_t(-1)}});
    auto rotate = [&](const std::string& a, const std::string& b, const std::string& c, const std::string& s) {
      return std::pair{g_.op("Sub", {g_.op("Mul", {a, c}), g_.op("Mul", {b, s})}),
                       g_.op("Add", {g_.op("Mul", {b, c}), g_.op("Mul", {a, s})})};
    };
    const auto [x1, x2] = rotate(p[0], p[1], cos_x_, sin_x_);
    const auto [y1, y2] = rotate(p[2], p[3], cos_y_, sin_y_);
    return g_.op("Concat", {x1, x2, y1, y2}, {{"axis", int64_t(-1)}});
  }

  // [N, heads * hd] -> [1, heads, N, hd], per-head RMSNorm (weight or none) and RoPE on the way.
  std::string heads(const std::string& x, int n_heads, const std::vector<float>* norm, bool rotate, const std::string& name) {
    std::string y = g_.op("Reshape", {x, g_.const_i64({0, n_heads, s_.head_dim}, {3})});
    y = m_.rms_norm(y, s_.rms_norm_eps, norm, name);
    if (rotate) y = rope(y);
    return g_.op("Unsqueeze", {g_.op("Transpose", {y}, {{"perm", std::vector<int64_t>{1, 0, 2}}}), g_.const_i64(0)});
  }

  std::string layer(int i, const std::string& h) {
    const Gemma4VisionLayerWeights& l = w_.layers[size_t(i)];
    const std::string p = "layers." + std::to_string(i);
    const float eps = s_.rms_norm_eps;
    // x += post_attention_norm(o_proj(attn(input_norm(x)))), attention scale 1.
    const std::string a = m_.rms_norm(h, eps, &l.input_norm, p + ".input_layernorm.weight");
    const std::string q = heads(clipped(a, l.q_proj, p + ".q_proj"), s_.heads, &l.q_norm, true, p + ".q_norm.weight");
    const std::string k = heads(clipped(a, l.k_proj, p + ".k_proj"), s_.kv_heads, &l.k_norm, true, p + ".k_norm.weight");
    const std::string v = heads(clipped(a, l.v_proj, p + ".v_proj"), s_.kv_heads, nullptr, false, "");
    std::string y = g_.node("Attention", {q, k, v, mask_}, 1, {{"scale", 1.f}})[0];  // [1, heads, N, hd]
    y = g_.op("Reshape", {g_.op("Transpose", {y}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}}),
                          g_.const_i64({-1, int64_t(s_.heads) * s_.head_dim}, {2})});
    const std::string o = m_.rms_norm(clipped(y, l.o_proj, p + ".o_proj"), eps, &l.post_attention_norm,
                                      p + ".post_attention_layernorm.weight");
    const std::string h1 = g_.op("Add", {h, o});
    // x += post_feedforward_norm(down(gelu_tanh(gate(y)) * up(y))), y = pre_feedforward_norm(x)
    const std::string b = m_.rms_norm(h1, eps, &l.pre_feedforward_norm, p + ".pre_feedforward_layernorm.weight");
    const std::string act = g_.op("Mul", {g_.gelu_tanh(clipped(b, l.gate_proj, p + ".gate_proj")), clipped(b, l.up_proj, p + ".up_proj")});
    const std::string down = m_.rms_norm(clipped(act, l.down_proj, p + ".down_proj"), eps, &l.post_feedforward_norm,
                                         p + ".post_feedforward_layernorm.weight");
    return g_.op("Add", {h1, down});
  }

  // Bins of pool x pool patches by position, bin = x / k + (cols / k) (y / k)
  // with cols = max x + 1 over the real patches, averaged through a one-hot
  // [bins, N] matrix (padding patches in none); then x sqrt(H), standardize,
  // weightless RMSNorm, projection.
  std::string pool_and_project(const std::string& h) {
    const int64_t k = s_.pool;
    const std::string kk = g_.scalar_i64(k), one = g_.scalar_i64(1);
    auto extent = [&](const std::string& p) {  // max position + 1 over the real patches; 0 for none
      const std::string masked = g_.op("Where", {valid_, p, g_.scalar_i64(-1)});
      const std::string with_floor = g_.op("Concat", {masked, g_.const_i64(-1)}, {{"axis", int64_t(0)}});
      return g_.op("Add", {g_.op("ReduceMax", {with_floor}, {{"keepdims", int64_t(0)}}), one});
    };
    const std::string bin_cols = g_.op("Div", {extent(x_), kk}), bin_rows = g_.op("Div", {extent(y_), kk});
    std::string bin = g_.op("Add", {g_.op("Div", {x_, kk}), g_.op("Mul", {bin_cols, g_.op("Div", {y_, kk})})});
    bin = g_.op("Where", {valid_, bin, g_.scalar_i64(-1)});
    const std::string bins = g_.op("Range", {g_.scalar_i64(0), g_.op("Mul", {bin_cols, bin_rows}), one});
    const std::string onehot = g_.op("Equal", {g_.op("Unsqueeze", {bins, g_.const_i64(-1)}), g_.op("Unsqueeze", {bin, g_.const_i64(0)})});
    std::string pooled = g_.op("MatMul", {g_.op("Cast", {onehot}, {{"to", int64_t(kFloat)}}), h});
    const float scale = float(std::sqrt(double(s_.hidden)) / double(k * k));
    pooled = g_.op("Mul", {pooled, g_.scalar_f32(scale)});
    if (s_.standardize)
      pooled = g_.op("Mul", {g_.op("Sub", {pooled, m_.values("std_bias", w_.std_bias)}), m_.values("std_scale", w_.std_scale)});
    pooled = m_.rms_norm(pooled, s_.rms_norm_eps);
    return m_.linear(pooled, w_.embedding_projection, "embed_vision.embedding_projection");
  }

  const Gemma4VisionShape& s_;
  const Gemma4VisionWeights& w_;
  GraphBuilder& g_;
  MediaWriter m_;
  OneImageNames names_;
  std::string x_, y_, valid_, valid_f_, mask_;
  std::string cos_x_, sin_x_, cos_y_, sin_y_;
};

}  // namespace

ExportFrontends load_export_frontends(const std::string& model_dir, const ModelConfig& decoder) {
  ExportFrontends f;
  f.config = load_frontend_config(model_dir, decoder);
  if (f.config.vision == VisionFrontend::None && f.config.audio == AudioFrontend::None) return f;
  const TensorStore store = TensorStore::open_dir(model_dir);
  f.weights_loaded = load_frontend_weights(f.config, store, f.weights);
  return f;
}

bool vision_graph_takes_positions(const FrontendConfig& c) {
  return c.vision == VisionFrontend::UnifiedPatches || c.vision == VisionFrontend::Gemma4Encoder;
}

std::string vision_graph_layout(const FrontendConfig& c, VisionImages images) {
  const std::string grid = " (x, y) of each patch, (-1, -1) for padding";
  switch (c.vision) {
    case VisionFrontend::UnifiedPatches: {
      const std::string p = std::to_string(c.unified.patch);
      return "pixel_values [num_patches, 3*" + p + "*" + p + "]: " + p + " px patches in (row, col, channel) order, x / 255; " +
             "image_position_ids [num_patches, 2]:" + grid + " on the " + p + " px grid";
    }
    case VisionFrontend::Siglip: {
      const std::string s = std::to_string(c.siglip.image_size);
      return "pixel_values [num_images, 3, " + s + ", " + s + "]: RGB stretched to " + s + " x " + s +
             " (PIL bilinear), (x / 255 - 0.5) / 0.5";
    }
    case VisionFrontend::Gemma4Encoder: {
      const std::string p = std::to_string(c.gemma4.patch);
      const bool stacked = images == VisionImages::Stacked;
      const std::string n = stacked ? "num_images, " : "";
      return "pixel_values [" + n + "num_patches, 3*" + p + "*" + p + "]: " + p +
             " px patches in (row, col, channel) order, x / 255; image_position_ids [" + n + "num_patches, 2]:" + grid +
             " on the " + p + " px grid; " +
             (stacked ? "image_features [num_images, num_soft_tokens, hidden] (GenAI's Gemma-4 processor: num_images >= 1, "
                        "every image with image 0's patch count)"
                      : "one image per run");
    }
    case VisionFrontend::None: break;
  }
  return "";
}

namespace {

// GenAI's Gemma-4 processor stacks its images: pixel_values [images,
// patches, 3*p*p] and positions [images, patches, 2] -> image_features
// [images, soft tokens, hidden]. A Scan over the images runs the one-image
// encoder on each, so attention and pooling stay within an image. Its
// weights and constants move to the outer graph, which the body sees (ONNX
// outer scope), so that they are initializers of the model as in every
// other graph.
void build_gemma4_stacked(const ExportFrontends& f, WeightFile& weights, onnx::GraphProto& outer) {
  onnx::GraphProto body;
  body.set_name("one_image");
  {
    GraphBuilder b(body, weights);
    Gemma4EncoderWriter(f.config.gemma4, f.weights.gemma4, b, {"image_pixels", "image_positions", "image_features_one"}).build();
  }
  for (onnx::TensorProto& t : *body.mutable_initializer()) outer.add_initializer()->Swap(&t);
  body.clear_initializer();
  GraphBuilder g(outer, weights);
  const Gemma4VisionShape& s = f.config.gemma4;
  const std::string images = "num_images";
  g.input(media_names::kPixelValues, kFloat, {images, std::string("num_patches"), int64_t(s.patch_dim())});
  g.input(media_names::kImagePositionIds, kInt64, {images, std::string("num_patches"), int64_t(2)});
  g.output(media_names::kImageFeatures, kFloat,
           {images, std::string("num_soft_tokens"), int64_t(f.weights.gemma4.embedding_projection.out)});
  g.node_named("Scan", {media_names::kPixelValues, media_names::kImagePositionIds}, {media_names::kImageFeatures},
               {{"body", std::move(body)}, {"num_scan_inputs", int64_t(2)}});
}

}  // namespace

void build_vision_graph(const ExportFrontends& f, VisionImages images, WeightFile& weights, onnx::ModelProto& out) {
  if (!f.has_vision()) throw ConfigError("ONNX export: the model has no vision frontend weights to export");
  init_model(out, "vision");
  if (images == VisionImages::Stacked && f.config.vision == VisionFrontend::Gemma4Encoder)
    return build_gemma4_stacked(f, weights, *out.mutable_graph());
  if (images == VisionImages::Stacked && f.config.vision == VisionFrontend::UnifiedPatches)
    throw ConfigError("ONNX export: gemma4_unified's vision graph takes one image per run; it has no stacked form");
  GraphBuilder g(*out.mutable_graph(), weights);
  switch (f.config.vision) {
    case VisionFrontend::UnifiedPatches: build_unified_vision(f.config.unified, f.weights.unified, g); break;
    case VisionFrontend::Siglip: build_siglip(f.config.siglip, f.weights.siglip, g); break;
    case VisionFrontend::Gemma4Encoder: Gemma4EncoderWriter(f.config.gemma4, f.weights.gemma4, g).build(); break;
    case VisionFrontend::None: break;
  }
}

void build_speech_graph(const ExportFrontends& f, WeightFile& weights, onnx::ModelProto& out) {
  if (!f.has_audio()) throw ConfigError("ONNX export: the model has no audio frontend weights to export");
  init_model(out, "speech");
  GraphBuilder g(*out.mutable_graph(), weights);
  const UnifiedAudioShape& s = f.config.audio_shape;
  const WeightMatrix& proj = f.weights.audio_projection;
  g.input(media_names::kAudioFrames, kFloat, {std::string("num_frames"), int64_t(s.frame)});
  g.output(media_names::kAudioFeatures, kFloat, {std::string("num_frames"), int64_t(proj.out)});
  MediaWriter m(g, "speech.");
  // Frames of raw samples -> weightless RMSNorm -> projection.
  g.node_named("Identity", {m.linear(m.rms_norm(media_names::kAudioFrames, s.rms_norm_eps), proj, "embed_audio.embedding_projection")},
               {media_names::kAudioFeatures});
}

}  // namespace splitdec::onnx_export
