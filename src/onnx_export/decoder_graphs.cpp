#include "onnx_export/decoder_graphs.h"

#include <cmath>
#include <limits>
#include <map>
#include <memory>

#include "core/dtype.h"
#include "model/gemma_model.h"
#include "onnx_export/mask_graph.h"
#include "onnx_export/nbits_weights.h"
#include "onnx_export/onnx_graph.h"

namespace splitdec::onnx_export {

namespace names {
std::string past(int layer, bool key) { return "past_key_values." + std::to_string(layer) + (key ? ".key" : ".value"); }
std::string present(int layer, bool key) { return "present." + std::to_string(layer) + (key ? ".key" : ".value"); }
}  // namespace names

namespace {

constexpr int kFloat = onnx::TensorProto::FLOAT;
constexpr int kInt64 = onnx::TensorProto::INT64;

// Values every layer of a decoder graph shares.
struct Shared {
  std::string batch;     // [1] int64
  std::string seq;       // [1] S, the new positions
  std::string total;     // [1] T, past + S
  std::string past_len;  // [1] T - S
};

// How a layer's attention is computed; one implementation per graph kind.
// q: [B,S,Hq,hd] (normed, rotated); k, v: [B,S,Hkv,hd], or empty on a
// KV-shared layer. Returns [B,S,Hq*hd].
class AttentionGraph {
 public:
  virtual ~AttentionGraph() = default;
  virtual std::string attend(int layer, const std::string& q, const std::string& k, const std::string& v) = 0;
};

class DecoderWriter {
 public:
  DecoderWriter(const Model& model, GraphBuilder& g) : m_(model), c_(model.config()), g_(g) {}

  std::string rms_norm(const std::string& x, const std::vector<float>* weight, const std::string& weight_name) {
    const std::string sq = g_.op("Mul", {x, x});
    const std::string ms = g_.op("ReduceMean", {sq, g_.const_i64(-1)}, {{"keepdims", int64_t(1)}});
    const std::string inv = g_.op("Reciprocal", {g_.op("Sqrt", {g_.op("Add", {ms, g_.scalar_f32(c_.rms_norm_eps)})})});
    const std::string y = g_.op("Mul", {x, inv});
    if (weight == nullptr) return y;
    // Gemma-3 scales by (1 + w): folded into the stored weight, as splitdec computes 1.f + w.
    return g_.op("Mul", {y, g_.weight(weight_name, {int64_t(weight->size())}, [&] {
                                std::vector<float> w = *weight;
                                if (c_.norm_adds_one)
                                  for (float& v : w) v = 1.f + v;
                                return w;
                              })});
  }

  // y = x W^T. Float formats: W stored transposed ([in, out]) so that MatMul
  // broadcasts over [B,S,in]. Q8_0 / Q4_0: MatMulNBits on the blocks as they
  // are (nbits_weights.h), with int8 activations where splitdec quantizes
  // them too (accuracy_level 4), else f32 ones (level 1).
  std::string linear(const std::string& x, const WeightMatrix& w, const std::string& name) {
    if (has_nbits_form(w)) return nbits_matmul(x, w, name);
    return g_.op("MatMul", {x, g_.weight(name + ".weight_t", {w.in, w.out}, [&] {
                              std::vector<float> t(size_t(w.out) * size_t(w.in)), row(size_t(w.in));
                              for (int o = 0; o < w.out; ++o) {
                                w.row_f32(o, row.data());
                                for (int i = 0; i < w.in; ++i) t[size_t(i) * size_t(w.out) + size_t(o)] = row[size_t(i)];
                              }
                              return t;
                            })});
  }

  std::string nbits_matmul(const std::string& x, const WeightMatrix& w, const std::string& name) {
    const auto [codes, scales] = nbits_tensors(w, name);
    const std::vector<Attr> attrs = {{"K", int64_t(w.in)},
                                     {"N", int64_t(w.out)},
                                     {"bits", int64_t(nbits_bits(w))},
                                     {"block_size", int64_t(kNbitsBlockSize)},
                                     {"accuracy_level", int64_t(w.int8_activations ? 4 : 1)}};
    return g_.node("MatMulNBits", {x, codes, scales}, 1, attrs, "com.microsoft")[0];
  }

  // The codes [out, blocks, blob] and scales [out, blocks] of a block matrix.
  std::pair<std::string, std::string> nbits_tensors(const WeightMatrix& w, const std::string& name) {
    const int64_t blocks = nbits_blocks(w);
    return {g_.weight_u8(name + ".codes", {w.out, blocks, nbits_blob_bytes(w)}, [&] { return nbits_codes(w); }),
            g_.weight(name + ".scales", {w.out, blocks}, [&] { return nbits_scales(w); })};
  }

  // cos/sin [B,S,1,hd] for one set of inverse frequencies, made once per graph.
  std::pair<std::string, std::string> rope_tables(const std::vector<float>& inv_freq) {
    auto& cached = rope_cache_[inv_freq];
    if (!cached.first.empty()) return cached;
    const int half = int(inv_freq.size());
    const std::string pos = g_.op("Unsqueeze", {g_.op("Cast", {names::kPositionIds}, {{"to", int64_t(kFloat)}}), g_.const_i64(-1)});
    const std::string angle = g_.op("Mul", {pos, g_.const_f32(inv_freq, {half})});  // f32, as HF forms it
    auto table = [&](const char* fn) {
      const std::string t = g_.op(fn, {angle});
      return g_.op("Unsqueeze", {g_.op("Concat", {t, t}, {{"axis", int64_t(-1)}}), g_.const_i64(2)});
    };
    cached = {table("Cos"), table("Sin")};
    return cached;
  }

  // rotate_half RoPE: pairs (k, k + hd/2).
  std::string rope(const std::string& x, const std::vector<float>& inv_freq) {
    const auto [cos, sin] = rope_tables(inv_freq);
    const int64_t half = int64_t(inv_freq.size());
    const std::string axis = g_.const_i64(-1);
    const std::string x1 = g_.op("Slice", {x, g_.const_i64(0), g_.const_i64(half), axis});
    const std::string x2 = g_.op("Slice", {x, g_.const_i64(half), g_.const_i64(2 * half), axis});
    const std::string rotated = g_.op("Concat", {g_.op("Neg", {x2}), x1}, {{"axis", int64_t(-1)}});
    return g_.op("Add", {g_.op("Mul", {x, cos}), g_.op("Mul", {rotated, sin})});
  }


  // The body of Model::run_layer, as graph nodes.
  std::string layer(int l, const std::string& hidden, AttentionGraph& attention) {
    const LayerSpec& spec = c_.layers[size_t(l)];
    const LayerWeights& w = m_.weights().layers[size_t(l)];
    const std::string p = "layers." + std::to_string(l);
    g_.set_scope(p);
    const int hd = spec.head_dim, Hq = c_.num_heads, Hkv = spec.num_kv_heads;
    const bool shared = c_.is_kv_shared(l);

    const std::string x = rms_norm(hidden, &w.input_norm, p + ".input_layernorm.weight");
    std::string q = g_.op("Reshape", {linear(x, w.q_proj, p + ".q_proj"), g_.const_i64({0, 0, Hq, hd}, {4})});
    q = rope(rms_norm(q, &w.q_norm, p + ".q_norm.weight"), spec.inv_freq);
    std::string k, v;
    if (!shared) {
      const std::string heads = g_.const_i64({0, 0, Hkv, hd}, {4});
      const std::string k_raw = g_.op("Reshape", {linear(x, w.k_proj, p + ".k_proj"), heads});
      // k_eq_v: V is the raw k_proj output, before k_norm and RoPE.
      v = spec.k_eq_v ? k_raw : g_.op("Reshape", {linear(x, w.v_proj, p + ".v_proj"), heads});
      k = rope(rms_norm(k_raw, &w.k_norm, p + ".k_norm.weight"), spec.inv_freq);
      if (spec.v_norm) v = rms_norm(v, nullptr, "");  // RMS norm without weight
    }
    const std::string attn = attention.attend(l, q, k, v);

    std::string o = rms_norm(linear(attn, w.o_proj, p + ".o_proj"), &w.post_attention_norm,
                             p + ".post_attention_layernorm.weight");
    const std::string h1 = g_.op("Add", {hidden, o});
    const std::string x2 = rms_norm(h1, &w.pre_feedforward_norm, p + ".pre_feedforward_layernorm.weight");
    const std::string act = g_.op("Mul", {g_.gelu_tanh(linear(x2, w.gate_proj, p + ".gate_proj")), linear(x2, w.up_proj, p + ".up_proj")});
    const std::string down = rms_norm(linear(act, w.down_proj, p + ".down_proj"), &w.post_feedforward_norm,
                                      p + ".post_feedforward_layernorm.weight");
    std::string out = g_.op("Add", {h1, down});
    if (c_.per_layer_dim > 0) {
      // add_per_layer_input: out += post_norm(projection(gelu(gate(out)) * this layer's input)).
      if (per_layer_rows_.empty())  // [B,S,L*P] as bound -> [B,S,L,P], once per graph
        per_layer_rows_ = g_.op("Reshape", {names::kPerLayerInputs, g_.const_i64({0, 0, c_.num_layers, c_.per_layer_dim}, {4})});
      const std::string input = g_.op("Gather", {per_layer_rows_, g_.scalar_i64(l)}, {{"axis", int64_t(2)}});
      const std::string gated = g_.op("Mul", {g_.gelu_tanh(linear(out, w.per_layer_input_gate, p + ".per_layer_input_gate")), input});
      out = g_.op("Add", {out, rms_norm(linear(gated, w.per_layer_projection, p + ".per_layer_projection"),
                                        &w.post_per_layer_input_norm, p + ".post_per_layer_input_norm.weight")});
    }
    if (w.layer_scalar != 1.f) out = g_.op("Mul", {out, g_.scalar_f32(w.layer_scalar)});
    g_.set_scope("");
    return out;
  }

  // Model::logits: final norm, LM head (a Gemm on the [V, H] table, which
  // the embedding graph shares), final softcap.
  std::string logits(const std::string& hidden) {
    g_.set_scope("lm_head");
    const int H = c_.hidden_size, V = c_.vocab_size;
    const std::string x = rms_norm(hidden, &m_.weights().final_norm, "final_norm.weight");
    const std::string flat = g_.op("Reshape", {x, g_.const_i64({-1, H}, {2})});
    const auto& [table_name, table] = output_table();
    std::string y = has_nbits_form(table) ? nbits_matmul(flat, table, table_name)
                                          : g_.node("Gemm", {flat, float_table(table_name, table)}, 1, {{"transB", int64_t(1)}})[0];
    const std::string shape = g_.op("Concat", {g_.op("Shape", {hidden}, {{"end", int64_t(2)}}), g_.const_i64(V)},
                                    {{"axis", int64_t(0)}});
    y = g_.op("Reshape", {y, shape});
    if (c_.final_logit_softcap) {
      const float cap = *c_.final_logit_softcap;
      y = g_.op("Mul", {g_.op("Tanh", {g_.op("Div", {y, g_.scalar_f32(cap)})}), g_.scalar_f32(cap)});
    }
    g_.set_scope("");
    return y;
  }

  // Model::per_layer_inputs: (norm(W_proj e H^-0.5) + T[table id] sqrt(P)) 2^-0.5
  // as [B,S,L*P] (layer-major, per_layer_dims); table_ids [B,S] (pad on media
  // rows), embeds [B,S,H].
  std::string per_layer_inputs(const std::string& table_ids, const std::string& embeds) {
    g_.set_scope("per_layer_inputs");
    const ModelWeights& w = m_.weights();
    const MappedTable& t = w.per_layer_table;
    const int64_t L = c_.num_layers, P = c_.per_layer_dim, LP = L * P;
    const std::string layers = g_.const_i64({0, 0, L, P}, {4});
    // The table as float: [per_layer_vocab, L * P] (ONNX has no mapped rows;
    // the package carries the whole table, docs/onnx-export.md).
    const std::string table = g_.weight("embed_tokens_per_layer.weight", {t.rows(), LP}, [&] {
      std::vector<float> v(size_t(t.rows()) * size_t(LP));
      for (int64_t r = 0; r < t.rows(); ++r) t.row_f32(r, v.data() + r * LP);
      return v;
    });
    const float table_scale = round_to_dtype(std::sqrt(float(P)), t.dtype());
    const std::string rows = g_.op("Reshape", {g_.op("Mul", {g_.op("Gather", {table, table_ids}), g_.scalar_f32(table_scale)}), layers});
    const std::string projected = g_.op("Mul", {linear(embeds, w.per_layer_model_projection, "per_layer_model_projection"),
                                                g_.scalar_f32(1.f / std::sqrt(float(c_.hidden_size)))});
    const std::string normed = rms_norm(g_.op("Reshape", {projected, layers}), &w.per_layer_projection_norm,
                                        "per_layer_projection_norm.weight");
    const std::string out = g_.op("Mul", {g_.op("Add", {normed, rows}), g_.scalar_f32(1.f / std::sqrt(2.f))});
    g_.set_scope("");
    return g_.op("Reshape", {out, g_.const_i64({0, 0, LP}, {3})});
  }

  // Rows E[ids] of the embedding table as f32 ([..., hidden] for ids [...]).
  // A block table is gathered as codes and scales and dequantized in the
  // graph (the values row_f32 gives), sharing its bytes with a tied LM head.
  std::string embedding_rows(const std::string& ids) {
    const WeightMatrix& e = m_.weights().embed_tokens;
    if (!has_nbits_form(e)) return g_.op("Gather", {float_table(kEmbeddingName, e), ids});
    const auto [codes, scales] = nbits_tensors(e, kEmbeddingName);
    std::string q = g_.op("Gather", {codes, ids});  // [..., blocks, blob] uint8
    int zero_point = 128;
    if (nbits_bits(e) == 4) {  // value 2i is the low nibble of byte i, 2i + 1 the high one
      const std::string low = g_.op("BitwiseAnd", {q, g_.const_u8(0x0f)});
      const std::string high = g_.op("BitShift", {q, g_.const_u8(4)}, {{"direction", std::string("RIGHT")}});
      const std::string last = g_.const_i64(-1);
      const std::string pairs = g_.op("Concat", {g_.op("Unsqueeze", {low, last}), g_.op("Unsqueeze", {high, last})},
                                      {{"axis", int64_t(-1)}});  // [..., blocks, 16, 2]
      const std::string blocks = g_.const_i64({nbits_blocks(e), kNbitsBlockSize}, {2});
      q = g_.op("Reshape", {pairs, g_.op("Concat", {g_.op("Shape", {ids}), blocks}, {{"axis", int64_t(0)}})});
      zero_point = 8;
    }
    const std::string values = g_.op("Sub", {g_.op("Cast", {q}, {{"to", int64_t(kFloat)}}), g_.scalar_f32(float(zero_point))});
    const std::string block_scales = g_.op("Unsqueeze", {g_.op("Gather", {scales, ids}), g_.const_i64(-1)});
    const std::string shape = g_.op("Concat", {g_.op("Shape", {ids}), g_.const_i64(e.in)}, {{"axis", int64_t(0)}});
    return g_.op("Reshape", {g_.op("Mul", {values, block_scales}), shape});
  }

 private:
  static constexpr const char* kEmbeddingName = "embed_tokens.weight";  // shared by the embedding and a tied LM head

  // The LM head's matrix and its tensor name: the embedding table when tied.
  std::pair<std::string, const WeightMatrix&> output_table() const {
    const auto& w = m_.weights();
    if (w.lm_head.out == 0) return {kEmbeddingName, w.embed_tokens};
    return {"lm_head.weight", w.lm_head};
  }

  // A [out, in] table as f32.
  std::string float_table(const std::string& name, const WeightMatrix& w) {
    return g_.weight(name, {w.out, w.in}, [&] {
      std::vector<float> t(size_t(w.out) * size_t(w.in));
      for (int o = 0; o < w.out; ++o) w.row_f32(o, t.data() + size_t(o) * size_t(w.in));
      return t;
    });
  }

  const Model& m_;
  const ModelConfig& c_;
  GraphBuilder& g_;
  std::map<std::vector<float>, std::pair<std::string, std::string>> rope_cache_;
  std::string per_layer_rows_;  // the decoder's per_layer_inputs as [B,S,L,P]
};

// per_layer_inputs between the graphs: [batch, sequence, layers * P], the
// rank ONNX Runtime GenAI's multimodal route allocates for it (Embeddings,
// sized by the graph's last dimension).
std::vector<Dim> per_layer_dims(const ModelConfig& c) {
  return {std::string("batch"), std::string("sequence_length"), int64_t(c.num_layers) * c.per_layer_dim};
}

std::vector<Dim> kv_dims(const LayerSpec& spec, Dim length) {
  return {std::string("batch"), int64_t(spec.num_kv_heads), std::move(length), int64_t(spec.head_dim)};
}

// [B,S,H,hd] -> [B,H,S,hd] and back.
std::string to_heads_first(GraphBuilder& g, const std::string& x) {
  return g.op("Transpose", {x}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
}
std::string merge_heads(GraphBuilder& g, const std::string& y_heads_first, int width) {
  const std::string y = g.op("Transpose", {y_heads_first}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  return g.op("Reshape", {y, g.const_i64({0, 0, width}, {3})});
}

// Split prefill: new K/V scattered into the shared buffers at T - S, then
// ONNX Attention over the first T slots with the policy's boolean mask.
class PrefillAttention : public AttentionGraph {
 public:
  PrefillAttention(const ModelConfig& c, GraphBuilder& g, const Shared& s, MaskGraph& masks)
      : c_(c), g_(g), s_(s), masks_(masks) {
    write_at_ = g_.op("Expand", {s_.past_len, s_.batch});  // [B]: every row writes at T - S
  }
  std::string attend(int l, const std::string& q, const std::string& k, const std::string& v) override {
    const LayerSpec& spec = c_.layers[size_t(l)];
    if (!k.empty()) {
      auto scatter = [&](const std::string& x, bool key) {
        g_.node_named("TensorScatter", {names::past(l, key), to_heads_first(g_, x), write_at_}, {names::present(l, key)},
                      {{"axis", int64_t(2)}, {"mode", std::string("linear")}});
        return g_.op("Slice", {names::present(l, key), g_.const_i64(0), s_.total, g_.const_i64(2)});
      };
      kv_[l] = {scatter(k, true), scatter(v, false)};
    }
    const auto& [keys, values] = kv_.at(spec.kv_source);
    const std::string mask = masks_.boolean(layer_mask_rule(masks_.policy(), spec.type, spec.window));
    const std::string y = g_.node("Attention", {to_heads_first(g_, q), keys, values, mask}, 1,
                                  {{"scale", c_.attn_scale}})[0];
    return merge_heads(g_, y, c_.num_heads * spec.head_dim);
  }

 private:
  const ModelConfig& c_;
  GraphBuilder& g_;
  const Shared& s_;
  MaskGraph& masks_;
  std::string write_at_;
  std::map<int, std::pair<std::string, std::string>> kv_;
};

// Split decode: GroupQueryAttention on the shared buffers. No mask input:
// causal plus local_window_size, which in ONNX Runtime counts W keys
// including the query, as splitdec's window does.
class DecodeAttention : public AttentionGraph {
 public:
  DecodeAttention(const ModelConfig& c, GraphBuilder& g, const Shared& s) : c_(c), g_(g) {
    // seqlens_k = valid keys - 1 per row; total_sequence_length = T.
    const std::string valid = g_.op("ReduceSum", {names::kAttentionMask, g_.const_i64(1)}, {{"keepdims", int64_t(0)}});
    seqlens_ = g_.op("Cast", {g_.op("Sub", {valid, g_.const_i64(1)})}, {{"to", int64_t(onnx::TensorProto::INT32)}});
    total_ = g_.op("Cast", {g_.op("Squeeze", {s.total})}, {{"to", int64_t(onnx::TensorProto::INT32)}});
  }
  std::string attend(int l, const std::string& q, const std::string& k, const std::string& v) override {
    const LayerSpec& spec = c_.layers[size_t(l)];
    const int hd = spec.head_dim, Hq = c_.num_heads, Hkv = spec.num_kv_heads;
    auto flat = [&](const std::string& x, int heads) { return g_.op("Reshape", {x, g_.const_i64({0, 0, heads * hd}, {3})}); };
    const std::vector<Attr> attrs = {{"num_heads", int64_t(Hq)},
                                     {"kv_num_heads", int64_t(Hkv)},
                                     {"scale", c_.attn_scale},
                                     {"local_window_size", int64_t(spec.window > 0 ? spec.window : -1)}};
    if (!k.empty()) {
      const std::string k3 = flat(k, Hkv), v3 = flat(v, Hkv);
      const auto outs = g_.node_named(
          "GroupQueryAttention", {flat(q, Hq), k3, v3, names::past(l, true), names::past(l, false), seqlens_, total_},
          {g_.new_name("gqa_out"), names::present(l, true), names::present(l, false)}, attrs,
          "com.microsoft");
      src_[l] = {k3, v3};
      return outs[0];
    }
    // A KV-shared layer attends the source layer's buffer, which already
    // holds this step's K/V; passing them again rewrites the same slot.
    const int s = spec.kv_source;
    const auto& [k3, v3] = src_.at(s);
    return g_.node("GroupQueryAttention",
                   {flat(q, Hq), k3, v3, names::present(s, true), names::present(s, false), seqlens_, total_}, 3, attrs,
                   "com.microsoft")[0];
  }

 private:
  const ModelConfig& c_;
  GraphBuilder& g_;
  std::string seqlens_, total_;
  std::map<int, std::pair<std::string, std::string>> src_;
};

// Single: ONNX Attention with past inputs (it concatenates) and a dense float
// bias built from the same mask, for every prompt chunk and every step.
class SingleAttention : public AttentionGraph {
 public:
  SingleAttention(const ModelConfig& c, GraphBuilder& g, MaskGraph& masks) : c_(c), g_(g), masks_(masks) {}
  std::string attend(int l, const std::string& q, const std::string& k, const std::string& v) override {
    const LayerSpec& spec = c_.layers[size_t(l)];
    const std::string bias = masks_.bias(layer_mask_rule(masks_.policy(), spec.type, spec.window));
    std::string y;
    if (!k.empty()) {
      y = g_.new_name("attention_out");
      g_.node_named("Attention",
                    {to_heads_first(g_, q), to_heads_first(g_, k), to_heads_first(g_, v), bias, names::past(l, true),
                     names::past(l, false)},
                    {y, names::present(l, true), names::present(l, false)}, {{"scale", c_.attn_scale}});
    } else {
      const int s = spec.kv_source;
      y = g_.node("Attention", {to_heads_first(g_, q), names::present(s, true), names::present(s, false), bias}, 1,
                  {{"scale", c_.attn_scale}})[0];
    }
    return merge_heads(g_, y, c_.num_heads * spec.head_dim);
  }

 private:
  const ModelConfig& c_;
  GraphBuilder& g_;
  MaskGraph& masks_;
};

// with_media: the prompt stage (media rows replace the media tokens' rows);
// else the generation stage, where every id is text as in splitdec's decode
// steps (a generated image id included).
void build_embedding(const Model& model, GraphBuilder& g, bool with_media) {
  const ModelConfig& c = model.config();
  const int H = c.hidden_size;
  g.input(names::kInputIds, kInt64, {std::string("batch"), std::string("sequence_length")});
  // Any rank: [rows, hidden] as a caller binds it, or ONNX Runtime GenAI's
  // multimodal route's [images, tokens, hidden] from vision.onnx ([0, hidden]
  // without images and on generation steps).
  if (with_media) g.input_any_rank(names::kMediaEmbeds, kFloat);
  g.output(names::kInputsEmbeds, kFloat, {std::string("batch"), std::string("sequence_length"), int64_t(H)});
  if (c.per_layer_dim > 0) g.output(names::kPerLayerInputs, kFloat, per_layer_dims(c));
  DecoderWriter w(model, g);
  // Text rows: E[token] * sqrt(H), the scale rounded to the checkpoint dtype (Model::embed).
  const float scale = round_to_dtype(std::sqrt(float(H)), model.weights().dtype);
  const std::string text = g.op("Mul", {w.embedding_rows(names::kInputIds), g.scalar_f32(scale)});
  if (!with_media) {
    g.node_named("Identity", {text}, {names::kInputsEmbeds});
    if (c.per_layer_dim > 0)
      g.node_named("Identity", {w.per_layer_inputs(names::kInputIds, names::kInputsEmbeds)}, {names::kPerLayerInputs});
    return;
  }
  // Media rows replace the placeholder tokens' rows unscaled, in order. Read
  // as [-1, its last dim]: a width other than H fails the Concat below.
  const std::string width = g.op("Shape", {names::kMediaEmbeds}, {{"start", int64_t(-1)}});
  const std::string media_rows =
      g.op("Reshape", {names::kMediaEmbeds, g.op("Concat", {g.const_i64(-1), width}, {{"axis", int64_t(0)}})});
  std::string is_media = g.op("Equal", {names::kInputIds, g.const_i64(-1)});
  for (int id : {c.image_token_id, c.video_token_id, c.audio_token_id})
    if (id >= 0) is_media = g.op("Or", {is_media, g.op("Equal", {names::kInputIds, g.const_i64(id)})});
  // A one-token run embeds every id as text, a media id too: that is a
  // generation step (GenAI's rule for runs of one token), which is where
  // ONNX Runtime GenAI's multimodal route runs this graph again (with media
  // rows [0, hidden]) and where a model may generate a media id; splitdec's
  // decode steps embed it as text. Prompt runs read rows for their media ids.
  const std::string prompt_run =
      g.op("Greater", {g.op("Shape", {names::kInputIds}, {{"start", int64_t(1)}, {"end", int64_t(2)}}), g.const_i64(1)});
  is_media = g.op("And", {is_media, prompt_run});
  const std::string flat = g.op("Reshape", {is_media, g.const_i64(-1)});
  // Row 0 is a zero row that the text positions gather (so an empty
  // media_embeds [0, H] works); the k-th media position (from 1) gathers row
  // k. Fewer rows than media positions is Gather's out-of-bounds error (an
  // image whose rows were not bound), never a silent zero or text row; rows
  // past the last media position are not read (a caller may bind one buffer
  // of fixed capacity for every turn).
  const std::string nth = g.op("CumSum", {g.op("Cast", {flat}, {{"to", int64_t(kInt64)}}), g.scalar_i64(0)});
  const std::string rows = g.op("Concat", {g.const_f32(std::vector<float>(size_t(H), 0.f), {1, H}), media_rows},
                                {{"axis", int64_t(0)}});
  const std::string picked = g.op("Gather", {rows, g.op("Where", {flat, nth, g.const_i64(0)})});
  const std::string shape = g.op("Concat", {g.op("Shape", {names::kInputIds}), g.const_i64(H)}, {{"axis", int64_t(0)}});
  const std::string media = g.op("Reshape", {picked, shape});
  g.node_named("Where", {g.op("Unsqueeze", {is_media, g.const_i64(-1)}), media, text}, {names::kInputsEmbeds});
  if (c.per_layer_dim > 0) {
    // Media rows read pad's table row and project their own soft token, as Model::embed_prompt does.
    const std::string table_ids = g.op("Where", {is_media, g.const_i64(c.pad_token_id), names::kInputIds});
    g.node_named("Identity", {w.per_layer_inputs(table_ids, names::kInputsEmbeds)}, {names::kPerLayerInputs});
  }
}

void build_decoder(const Model& model, GraphKind kind, const GraphSettings& settings, GraphBuilder& g) {
  const ModelConfig& c = model.config();
  // The graphs that build a mask take the token ids too: media blocks are
  // runs of vision token ids (MaskGraph), so a caller binds no block ids.
  const bool prefill_inputs = kind != GraphKind::SplitDecode;
  if (prefill_inputs) g.input(names::kInputIds, kInt64, {std::string("batch"), std::string("sequence_length")});
  g.input(names::kInputsEmbeds, kFloat, {std::string("batch"), std::string("sequence_length"), int64_t(c.hidden_size)});
  g.input(names::kAttentionMask, kInt64, {std::string("batch"), std::string("total_sequence_length")});
  g.input(names::kPositionIds, kInt64, {std::string("batch"), std::string("sequence_length")});
  if (c.per_layer_dim > 0) g.input(names::kPerLayerInputs, kFloat, per_layer_dims(c));
  const bool single = kind == GraphKind::Single;
  for (int l = 0; l < c.num_layers; ++l) {
    if (c.is_kv_shared(l)) continue;
    const LayerSpec& spec = c.layers[size_t(l)];
    const Dim past_len = single ? Dim(std::string("past_sequence_length")) : Dim(settings.max_length);
    const Dim present_len = single ? Dim(std::string("total_sequence_length")) : Dim(settings.max_length);
    for (bool key : {true, false}) g.input(names::past(l, key), kFloat, kv_dims(spec, past_len));
    for (bool key : {true, false}) g.output(names::present(l, key), kFloat, kv_dims(spec, present_len));
  }
  // [batch, 1, vocab] on every run: a static 1 makes ONNX Runtime GenAI
  // bind and read last-token logits only (Model::IsPruned, Logits'
  // trimmed_prefill_logits_), not a [batch, run length, vocab] buffer (1 GiB
  // for a 1024-token prompt of a 262144-piece vocabulary, paged in on every
  // prompt).
  g.output(names::kLogits, kFloat, {std::string("batch"), int64_t(1), int64_t(c.vocab_size)});

  Shared s;
  s.batch = g.op("Shape", {names::kInputsEmbeds}, {{"end", int64_t(1)}});
  s.seq = g.op("Shape", {names::kInputsEmbeds}, {{"start", int64_t(1)}, {"end", int64_t(2)}});
  s.total = g.op("Shape", {names::kAttentionMask}, {{"start", int64_t(1)}, {"end", int64_t(2)}});
  s.past_len = g.op("Sub", {s.total, s.seq});

  std::unique_ptr<MaskGraph> masks;
  std::unique_ptr<AttentionGraph> attention;
  if (prefill_inputs)
    masks = std::make_unique<MaskGraph>(g, settings.policy, std::vector<int>{c.image_token_id, c.video_token_id}, s.batch,
                                        s.total, s.past_len);
  switch (kind) {
    case GraphKind::SplitPrefill: attention = std::make_unique<PrefillAttention>(c, g, s, *masks); break;
    case GraphKind::SplitDecode: attention = std::make_unique<DecodeAttention>(c, g, s); break;
    case GraphKind::Single: attention = std::make_unique<SingleAttention>(c, g, *masks); break;
    case GraphKind::Embedding:
    case GraphKind::TokenEmbedding: break;
  }
  DecoderWriter w(model, g);
  std::string hidden = names::kInputsEmbeds;
  for (int l = 0; l < c.num_layers; ++l) hidden = w.layer(l, hidden, *attention);
  if (kind == GraphKind::SplitDecode) {
    g.node_named("Identity", {w.logits(hidden)}, {names::kLogits});
    return;
  }
  // A prompt run needs only its last row's logits (rows of equal length, no
  // padding: the package's limits), so the LM head runs on that row alone.
  const std::string last = g.op("Slice", {hidden, g.const_i64(-1), g.const_i64(std::numeric_limits<int64_t>::max()), g.const_i64(1)});
  g.node_named("Identity", {w.logits(last)}, {names::kLogits});
}

}  // namespace

void build_graph(const Model& model, GraphKind kind, const GraphSettings& settings, WeightFile& weights,
                 onnx::ModelProto& out) {
  static const char* const graph_names[] = {"embedding", "token_embedding", "decoder_prefill", "decoder_decode", "decoder"};
  init_model(out, graph_names[int(kind)]);
  GraphBuilder g(*out.mutable_graph(), weights);
  if (kind == GraphKind::Embedding || kind == GraphKind::TokenEmbedding)
    build_embedding(model, g, kind == GraphKind::Embedding);
  else build_decoder(model, kind, settings, g);
}

}  // namespace splitdec::onnx_export
