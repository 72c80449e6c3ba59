// Float64 references for the Gemma-4 layer pieces that have their own fast
// files: per-layer embeddings (per_layer_embeddings.h) and the mixture of
// experts (mixture_of_experts.h). Plain loops in double over the weights
// expanded exactly to f32, written from transformers' Gemma4TextModel /
// Gemma4TextDecoderLayer / Gemma4TextRouter / Gemma4TextExperts; the tests
// hold the fast paths to them.
#pragma once

#include <vector>

#include "io/model_config.h"
#include "model/weights.h"

namespace splitdec::ref {

// [layers, rows, P], as splitdec::per_layer_inputs.
std::vector<double> per_layer_inputs(const ModelConfig& config, const ModelWeights& weights, const int* table_tokens,
                                     const float* embeddings, int rows);

// hidden + the layer's per-layer term, [rows, hidden]; input: [rows, P].
std::vector<double> add_per_layer_input(const ModelConfig& config, const LayerWeights& layer, const double* input,
                                        const float* hidden, int rows);

// The experts' weighted sum per row [rows, hidden], as splitdec::mixture_of_experts.
std::vector<double> mixture_of_experts(const ModelConfig& config, const LayerSpec& spec, const LayerWeights& layer,
                                       const float* residual, const float* expert_input, int rows);

}  // namespace splitdec::ref
