// The decoder's weights, resolved from checkpoint tensor names and checked
// against the shapes the config implies. Matrices keep the checkpoint's
// format (bf16 / f16: decode reads half the bytes); everything else is f32.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "splitdec/options.h"
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

  // Per-layer embeddings (ModelConfig::per_layer_dim): gate [P, H],
  // projection [H, P], and the norm after the projection [H].
  WeightMatrix per_layer_input_gate, per_layer_projection;
  std::vector<float> post_per_layer_input_norm;

  // Mixture of experts (LayerSpec::num_experts = E, expert width I).
  WeightMatrix router;                       // [E, H]
  std::vector<float> router_scale;           // [H]
  std::vector<float> per_expert_scale;       // [E]
  std::vector<WeightMatrix> expert_gate_up;  // E of [2I, H]: gate rows, then up rows
  std::vector<WeightMatrix> expert_down;     // E of [H, I]
  // pre_feedforward_layernorm_2 (experts' input), post_feedforward_layernorm_1
  // (dense MLP's output), post_feedforward_layernorm_2 (experts' output).
  std::vector<float> pre_feedforward_norm_2, post_feedforward_norm_1, post_feedforward_norm_2;
};

// A float table left in the checkpoint file and read a row at a time (the
// per-layer embedding table, the largest tensor of Gemma-4 E2B/E4B): it
// costs no resident memory. Rows are read with pread from a descriptor held
// open, so a file truncated under a running server is an error, not SIGBUS,
// and no page of it stays mapped; a table that lies in no plain file (a
// GGUF's) is read from the mapping instead.
class MappedTable {
 public:
  MappedTable() = default;
  MappedTable(std::shared_ptr<const TensorStore> store, const TensorView* view);
  bool empty() const { return view_ == nullptr; }
  int64_t rows() const;
  int64_t cols() const;
  DType dtype() const;
  // Row r (checked by the caller) as f32. FormatError naming the tensor for
  // a short read or a non-finite value.
  void row_f32(int64_t r, float* dst) const;

 private:
  std::shared_ptr<const TensorStore> store_;
  const TensorView* view_ = nullptr;
  std::shared_ptr<const int> fd_;  // the file, open for pread; null: read the mapping
  uint64_t offset_ = 0;            // of the table's first byte in the file
};

struct ModelWeights {
  DType dtype = DType::F32;        // dtype of the checkpoint's embedding table
  WeightMatrix embed_tokens;        // [vocab, hidden]
  std::vector<float> final_norm;    // [hidden]
  WeightMatrix lm_head;             // [vocab, hidden]; empty when tied to embed_tokens
  std::vector<LayerWeights> layers;
  // Per-layer embeddings: the packed table [per_layer_vocab, layers * P]
  // (mapped, not loaded), the projection of the input embedding
  // [layers * P, hidden] and its norm [P].
  MappedTable per_layer_table;
  WeightMatrix per_layer_model_projection;
  std::vector<float> per_layer_projection_norm;

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
  // Experts: a stack [E, out, in] of linear weights, one matrix per expert.
  // MappedTable: a float table left in the mapped file. Router: a linear
  // weight kept as stored (--weights and quantize leave it float).
  enum Kind { Linear, Embedding, Norm, Scalar, Experts, MappedTable, Router } kind;
  int layer = -1;  // the layer it belongs to; -1: the model's
  // The member it loads into: of LayerWeights when layer >= 0, of ModelWeights otherwise.
  std::variant<WeightMatrix LayerWeights::*, std::vector<float> LayerWeights::*, float LayerWeights::*,
               std::vector<WeightMatrix> LayerWeights::*, WeightMatrix ModelWeights::*,
               std::vector<float> ModelWeights::*, splitdec::MappedTable ModelWeights::*>
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
  // quantized to Q8_0 (K-quants: Q8_K) blocks (WeightMatrix::int8_activations).
  bool f32_activations = false;
};
// What each WeightStorage loads as: checkpoint (as stored), q8 / q8-f32act
// (Q8_0 everywhere), q4 / q4-f32act (Q4_0 linear layers, Q8_0 embedding:
// see docs/quantization.md for why).
WeightLoading weight_loading(WeightStorage storage);
// The same from a `--weights` value (parse_weight_storage's names).
WeightLoading weight_loading_named(const std::string& name);

// The decoder's matrices by checkpoint name (decoder prefix included; an
// untied LM head under both names it may have), each marked true for the
// embedding / LM head: what --weights and `splitdec quantize` convert.
// Expert stacks [E, out, in] convert as E * out rows of `in`.
std::map<std::string, bool> decoder_matrix_names(const ModelConfig& config, const std::string& prefix);

// Rows converted per convert_rows call: at most 64 MiB of f32 scratch.
int convert_piece_rows(int in);
// Rows [r0, r0 + rows) of the 2-D float tensor `v` stored into rows
// dst_r0.. of `dst` in dst's format (on the pool), then their file pages
// dropped. FormatError naming v for a non-finite value (and its element) or
// a value the format cannot hold.
void convert_rows(const TensorStore& store, const TensorView& v, int r0, int rows, WeightMatrix& dst, int dst_r0);

// `store` stays referenced by the weights that read it in place (MappedTable).
ModelWeights load_weights(const ModelConfig& config, const std::shared_ptr<const TensorStore>& store,
                          const std::function<void(size_t, size_t)>& progress = {}, const WeightLoading& loading = {});

}  // namespace splitdec
