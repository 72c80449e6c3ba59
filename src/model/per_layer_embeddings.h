// Per-layer embeddings (Gemma-4 E2B / E4B): besides the residual stream,
// every decoder layer reads a small per-token input of per_layer_dim (P)
// values, made once per row before the first layer from
//   (norm(W_proj * e * hidden^-0.5)[l] + T[token][l] * sqrt(P)) * 2^-0.5,
// e the row's input embedding (media rows: their soft token), T the packed
// [per_layer_vocab, layers * P] table read in place from the checkpoint,
// token the row's id (media rows: pad, as Hugging Face does). Each layer then
// adds norm(W_up * (gelu(W_gate * h) * input[l])) to its output.
// The float64 reference is in reference_gemma4_layers.h.
#pragma once

#include "io/model_config.h"
#include "kernels/cpu_context.h"
#include "model/weights.h"

namespace splitdec {

// out: [layers, rows, P] (layer-major: one layer's rows are contiguous).
// table_tokens: the id each row reads from the table (pad on media rows);
// InputError when one is past the table. embeddings: the rows' input
// embeddings [rows, hidden].
void per_layer_inputs(const ModelConfig& config, const ModelWeights& weights, const int* table_tokens,
                      const float* embeddings, int rows, float* out, bool rows_independent,
                      const CpuContext& cpu = CpuContext::process_default());

// hidden [rows, hidden] += post_norm(projection(gelu(gate(hidden)) * input)),
// input: this layer's [rows, P].
void add_per_layer_input(const ModelConfig& config, const LayerWeights& layer, const float* input, float* hidden, int rows,
                         bool rows_independent, const CpuContext& cpu = CpuContext::process_default());

}  // namespace splitdec
