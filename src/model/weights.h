// The decoder's weights, resolved from checkpoint tensor names and checked
// against the shapes the config implies. Matrices keep the checkpoint's
// format (bf16 / f16: decode reads half the bytes); everything else is f32.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/dtype.h"
#include "io/model_config.h"
#include "kernels/weight_matrix.h"

namespace splitdec {

class TensorStore;
struct TensorView;

struct LayerWeights {
  WeightMatrix q_proj, k_proj, v_proj, o_proj;  // k/v empty on KV-shared layers, v on k_eq_v layers
  std::vector<float> q_norm, k_norm;                  // [head_dim]
  std::vector<float> input_norm, post_attention_norm, pre_feedforward_norm, post_feedforward_norm;  // [hidden]
  WeightMatrix gate_proj, up_proj, down_proj;
  float layer_scalar = 1.f;  // multiplies the layer output (LayerSpec::layer_scalar)
};

struct ModelWeights {
  DType dtype = DType::F32;        // dtype of the checkpoint's embedding table
  WeightMatrix embed_tokens;        // [vocab, hidden]
  std::vector<float> final_norm;    // [hidden]
  WeightMatrix lm_head;             // [vocab, hidden]; empty when tied to embed_tokens
  std::vector<LayerWeights> layers;

  const WeightMatrix& output_matrix() const { return lm_head.empty() ? embed_tokens : lm_head; }
  size_t bytes() const;
};

// The tensor-name prefix of the decoder in a checkpoint: one of
// "model.language_model.", "model.", "language_model.model.".
std::string find_decoder_prefix(const TensorStore& store);

// Tensor names and shapes the config requires, in a stable order, and where
// each one goes: the loader fills ModelWeights from them and make-model
// writes them, so both agree and neither knows a family.
struct WeightSpec {
  std::string name;  // without prefix
  std::vector<int64_t> shape;
  enum Kind { Linear, Embedding, Norm, Scalar } kind;
  int layer = -1;  // the layer it belongs to; -1: the model's
  // The member it loads into: of LayerWeights when layer >= 0, of ModelWeights otherwise.
  std::variant<WeightMatrix LayerWeights::*, std::vector<float> LayerWeights::*, float LayerWeights::*,
               WeightMatrix ModelWeights::*, std::vector<float> ModelWeights::*>
      slot;
  bool optional = false;  // absent in the checkpoint: the member keeps its default (HF buffers)
};
std::vector<WeightSpec> decoder_weight_specs(const ModelConfig& config);

// How the loader stores the matrices of the linear layers and the
// embedding: as the checkpoint has them, or converted as they are read
// (`--weights q8`: Q8_0, a few thousand rows at a time, so converting costs
// no more memory than the result). Norms stay f32. A matrix whose rows do
// not fit the format (a block format: a length that is not a multiple of
// 32) keeps the checkpoint's format. Matrices a file holds quantized already
// (`splitdec quantize`) load as they are stored, whatever `format` says.
struct WeightLoading {
  std::optional<WeightFormat> format;            // the linear layers
  std::optional<WeightFormat> embedding_format;  // the embedding and LM head; unset: as `format`
  // Block formats: f32 activations in decode rather than activations
  // quantized to Q8_0 blocks (WeightMatrix::int8_activations).
  bool f32_activations = false;
};
// A `--weights` / LoadOptions::weights value: "" or "checkpoint" (as stored),
// "q8" / "q8-f32act" (Q8_0 everywhere), "q4" / "q4-f32act" (Q4_0 linear
// layers, Q8_0 embedding: see docs/quantization.md for why).
// InputError naming the value otherwise.
WeightLoading weight_loading_named(const std::string& name);

// The decoder's matrices by checkpoint name (decoder prefix included; an
// untied LM head under both names it may have), each marked true for the
// embedding / LM head: what --weights and `splitdec quantize` convert.
std::map<std::string, bool> decoder_matrix_names(const ModelConfig& config, const std::string& prefix);

// Rows converted per convert_rows call: at most 64 MiB of f32 scratch.
int convert_piece_rows(int in);
// Rows [r0, r0 + rows) of the 2-D float tensor `v` stored into rows
// dst_r0.. of `dst` in dst's format (on the pool), then their file pages
// dropped. FormatError naming v for a non-finite value (and its element) or
// a value the format cannot hold.
void convert_rows(const TensorStore& store, const TensorView& v, int r0, int rows, WeightMatrix& dst, int dst_r0);

ModelWeights load_weights(const ModelConfig& config, const TensorStore& store,
                          const std::function<void(size_t, size_t)>& progress = {}, const WeightLoading& loading = {});

}  // namespace splitdec
