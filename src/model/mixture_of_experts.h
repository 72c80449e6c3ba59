// The mixture of experts beside Gemma-4 26B-A4B's dense MLP. A router reads
// the layer's residual stream h:
//   scores = W_router * (rms(h) * scale * hidden^-0.5), p = softmax(scores),
// keeps the top_k experts, renormalises their p to sum 1 and multiplies each
// by per_expert_scale[e]. Each chosen expert e computes
//   W_down[e] * (gelu(W_gate[e] x) * W_up[e] x)
// on the experts' input x (pre_feedforward_layernorm_2(h)), and the row's
// output is the weighted sum, added in ascending expert order as Hugging
// Face's index_add does. Rows are grouped by expert, so prefill runs one
// GEMM per expert and a batched decode step reads each chosen expert once.
// The float64 reference is in reference_gemma4_layers.h.
#pragma once

#include <vector>

#include "io/model_config.h"
#include "kernels/cpu_context.h"
#include "model/weights.h"

namespace splitdec {

// The router's choice for one row: top_k experts, ascending in id, and their weights.
struct ExpertChoice {
  std::vector<int> experts;
  std::vector<float> weights;
};
std::vector<ExpertChoice> route_to_experts(const ModelConfig& config, const LayerSpec& spec, const LayerWeights& layer,
                                           const float* residual, int rows, bool rows_independent,
                                           const CpuContext& cpu = CpuContext::process_default());

// out [rows, hidden] = the experts' weighted sum for each row.
void mixture_of_experts(const ModelConfig& config, const LayerSpec& spec, const LayerWeights& layer, const float* residual,
                        const float* expert_input, int rows, float* out, bool rows_independent,
                        const CpuContext& cpu = CpuContext::process_default());

}  // namespace splitdec
