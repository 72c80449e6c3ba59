#include "model/mixture_of_experts.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/aligned_vector.h"
#include "kernels/linear.h"
#include "kernels/ops.h"

namespace splitdec {

std::vector<ExpertChoice> route_to_experts(const ModelConfig& c, const LayerSpec& spec, const LayerWeights& w,
                                           const float* residual, int rows, bool rows_independent, const CpuContext& cpu) {
  const int H = c.hidden_size, E = spec.num_experts, K = spec.top_k_experts;
  AlignedVector<float> x(size_t(rows) * size_t(H)), scores(size_t(rows) * size_t(E));
  ops::rms_norm(residual, nullptr, rows, H, c.rms_norm_eps, false, x.data());
  const float root = 1.f / std::sqrt(float(H));
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < H; ++k) x[size_t(r) * H + k] *= w.router_scale[size_t(k)] * root;
  linear(x.data(), rows, w.router, scores.data(), rows_independent, cpu);
  std::vector<ExpertChoice> out(static_cast<size_t>(rows));
  std::vector<int> order(static_cast<size_t>(E));
  for (int r = 0; r < rows; ++r) {
    float* s = scores.data() + size_t(r) * E;
    const float m = *std::max_element(s, s + E);
    float sum = 0.f;
    for (int e = 0; e < E; ++e) sum += (s[e] = std::exp(s[e] - m));
    for (int e = 0; e < E; ++e) s[e] /= sum;
    // torch.topk: the largest, ties to the lower index.
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + K, order.end(),
                      [&](int a, int b) { return s[a] > s[b] || (s[a] == s[b] && a < b); });
    float kept = 0.f;
    for (int k = 0; k < K; ++k) kept += s[order[size_t(k)]];
    ExpertChoice& choice = out[size_t(r)];
    choice.experts.assign(order.begin(), order.begin() + K);
    std::sort(choice.experts.begin(), choice.experts.end());
    for (int e : choice.experts) choice.weights.push_back(s[e] / kept * w.per_expert_scale[size_t(e)]);
  }
  return out;
}

void mixture_of_experts(const ModelConfig& c, const LayerSpec& spec, const LayerWeights& w, const float* residual,
                        const float* expert_input, int rows, float* out, bool rows_independent,
                        const CpuContext& cpu) {
  const int H = c.hidden_size, E = spec.num_experts, X = spec.expert_intermediate_size;
  const std::vector<ExpertChoice> choices = route_to_experts(c, spec, w, residual, rows, rows_independent, cpu);
  // Rows per expert, in row order, with the weight each gives that expert.
  std::vector<std::vector<std::pair<int, float>>> members(static_cast<size_t>(E));
  for (int r = 0; r < rows; ++r)
    for (size_t k = 0; k < choices[size_t(r)].experts.size(); ++k)
      members[size_t(choices[size_t(r)].experts[k])].push_back({r, choices[size_t(r)].weights[k]});
  // Each chosen expert's slice of the joint buffers: its rows' inputs,
  // gate/up outputs, activations and outputs.
  std::vector<int> used;
  std::vector<int64_t> at(static_cast<size_t>(E), 0);
  int64_t total = 0;
  for (int e = 0; e < E; ++e)
    if (!members[size_t(e)].empty()) used.push_back(e), at[size_t(e)] = total, total += int64_t(members[size_t(e)].size());
  AlignedVector<float> x(size_t(total) * H), gate_up(size_t(total) * 2 * X), act(size_t(total) * X), y(size_t(total) * H);
  for (int e : used)
    for (size_t i = 0; i < members[size_t(e)].size(); ++i)
      std::copy_n(expert_input + int64_t(members[size_t(e)][i].first) * H, H, x.data() + (at[size_t(e)] + int64_t(i)) * H);
  // Groups of GEMM size run one GEMM each; the small ones (every group of a
  // decode step) share one pool dispatch per projection.
  auto project = [&](const std::vector<WeightMatrix>& stack, const float* in, int in_width, float* result, int out_width) {
    std::vector<LinearJob> small;
    for (int e : used) {
      const int n = int(members[size_t(e)].size());
      const float* xe = in + at[size_t(e)] * in_width;
      float* ye = result + at[size_t(e)] * out_width;
      if (rows_independent || n < kGemmRows) small.push_back({xe, n, &stack[size_t(e)], ye});
      else linear(xe, n, stack[size_t(e)], ye, false, cpu);
    }
    if (!small.empty()) linear_batch(small.data(), int(small.size()), cpu);
  };
  project(w.expert_gate_up, x.data(), H, gate_up.data(), 2 * X);
  for (int64_t i = 0; i < total; ++i) {
    float* g = gate_up.data() + i * 2 * X;
    ops::gelu_tanh_gate(g, g + X, size_t(X), cpu);
    std::copy_n(g, X, act.data() + i * X);
  }
  project(w.expert_down, act.data(), X, y.data(), H);
  std::fill(out, out + int64_t(rows) * H, 0.f);
  for (int e : used)  // ascending: each row sums its experts in that order
    for (size_t i = 0; i < members[size_t(e)].size(); ++i) {
      float* o = out + int64_t(members[size_t(e)][i].first) * H;
      const float wgt = members[size_t(e)][i].second;
      const float* yi = y.data() + (at[size_t(e)] + int64_t(i)) * H;
      for (int k = 0; k < H; ++k) o[k] += wgt * yi[k];
    }
}

}  // namespace splitdec
