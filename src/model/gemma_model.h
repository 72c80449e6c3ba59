// The Gemma-3 / Gemma-4 decoder: the whole model math in one place.
// Family differences live in ModelConfig data (norm flavour, scale, head
// dims, KV sharing, layer scalar, per-layer embeddings, experts), not in
// branches scattered elsewhere; the two Gemma-4 extras have their own files
// (per_layer_embeddings.h, mixture_of_experts.h).
//
// Attention itself is supplied by the caller through AttentionStage, so the
// same layer math serves the reference oracle and every execution plan.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "io/model_config.h"
#include "kernels/cpu_context.h"
#include "model/weights.h"

namespace splitdec {

// Receives one layer's projected heads for `rows` token rows and writes the
// attention output. q: [rows, Hq, hd] (normed, rotated); k, v: [rows, Hkv, hd]
// (k normed and rotated, v through v_norm), or nullptr on a KV-shared layer,
// which reads the K/V of config.layers[layer].kv_source instead.
class AttentionStage {
 public:
  virtual ~AttentionStage() = default;
  virtual void attend(int layer, const float* q, const float* k, const float* v, float* out) = 0;
};

class Model {
 public:
  // progress(done, total) is called as weight tensors are read. `mmproj`:
  // the vision tower's GGUF beside a GGUF `dir`, which makes the model
  // multimodal (its weights load in the media frontend, not here).
  static Model load(const std::string& dir, const std::function<void(size_t, size_t)>& progress = {},
                    const WeightLoading& loading = {}, const std::string& mmproj = "");
  Model(ModelConfig config, ModelWeights weights);

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }

  // hidden[r] = E[token] * sqrt(hidden_size), the scale rounded to the
  // checkpoint dtype as HF does. Token ids must already be validated.
  void embed(const int* tokens, int rows, float* hidden) const;

  // Whether run_layers needs per-layer inputs (Gemma-4 E2B / E4B).
  bool has_per_layer_inputs() const { return config_.per_layer_dim > 0; }
  // The per-layer inputs [layers, rows, per_layer_dim] of rows whose table
  // ids are `table_tokens` (pad on media rows) and whose input embeddings
  // are `hidden` (model/per_layer_embeddings.h).
  void per_layer_inputs(const int* table_tokens, const float* hidden, int rows, float* out,
                        bool rows_independent = false, const CpuContext& cpu = CpuContext::process_default()) const;

  // Runs every decoder layer over hidden [rows, hidden_size] in place.
  // positions: the RoPE position of each row. per_layer: per_layer_inputs()
  // of these rows when has_per_layer_inputs(), else null.
  // `rows_independent`: each row computed as it would be alone (decode
  // steps of a batch; see linear()). `cpu`: the threads and SIMD table of
  // every kernel (a backend call's; by default the process's).
  void run_layers(float* hidden, int rows, const int64_t* positions, AttentionStage& attention,
                  bool rows_independent = false, const float* per_layer = nullptr,
                  const CpuContext& cpu = CpuContext::process_default()) const;

  // Final norm, LM head and (where configured) final logit softcap.
  void logits(const float* hidden, int rows, float* out, bool rows_independent = false,
              const CpuContext& cpu = CpuContext::process_default()) const;

 private:
  struct LayerScratch;
  void run_layer(int layer, float* hidden, int rows, const int64_t* positions, AttentionStage& attention,
                 LayerScratch& scratch, bool rows_independent, const float* per_layer, const CpuContext& cpu) const;
  ModelConfig config_;
  ModelWeights weights_;
};

}  // namespace splitdec
