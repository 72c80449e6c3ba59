#include "model/mixture_of_experts.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/aligned_vector.h"
#include "kernels/linear.h"
#include "kernels/ops.h"

namespace splitdec {

std::vector<ExpertChoice> route_to_experts(const ModelConfig& c, const LayerSpec& spec, const LayerWeights& w,
                                           const float* residual, int rows, bool rows_independent) {
  const int H = c.hidden_size, E = spec.num_experts, K = spec.top_k_experts;
  AlignedVector<float> x(size_t(rows) * size_t(H)), scores(size_t(rows) * size_t(E));
  ops::rms_norm(residual, nullptr, rows, H, c.rms_norm_eps, false, x.data());
  const float root = 1.f / std::sqrt(float(H));
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < H; ++k) x[size_t(r) * H + k] *= w.router_scale[size_t(k)] * root;
  linear(x.data(), rows, w.router, scores.data(), rows_independent);
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
                        const float* expert_input, int rows, float* out, bool rows_independent) {
  const int H = c.hidden_size, E = spec.num_experts, X = spec.expert_intermediate_size;
  const std::vector<ExpertChoice> choices = route_to_experts(c, spec, w, residual, rows, rows_independent);
  // Rows per expert, in row order, with the weight each gives that expert.
  std::vector<std::vector<std::pair<int, float>>> members(static_cast<size_t>(E));
  for (int r = 0; r < rows; ++r)
    for (size_t k = 0; k < choices[size_t(r)].experts.size(); ++k)
      members[size_t(choices[size_t(r)].experts[k])].push_back({r, choices[size_t(r)].weights[k]});
  std::fill(out, out + int64_t(rows) * H, 0.f);
  AlignedVector<float> x, gate_up, act, y;
  for (int e = 0; e < E; ++e) {  // ascending: each row sums its experts in that order
    const auto& group = members[size_t(e)];
    if (group.empty()) continue;
    const int n = int(group.size());
    x.resize(size_t(n) * H);
    for (int i = 0; i < n; ++i) std::copy_n(expert_input + int64_t(group[size_t(i)].first) * H, H, x.data() + int64_t(i) * H);
    gate_up.resize(size_t(n) * 2 * X);
    linear(x.data(), n, w.expert_gate_up[size_t(e)], gate_up.data(), rows_independent);
    act.resize(size_t(n) * X);
    for (int i = 0; i < n; ++i) {
      float* g = gate_up.data() + int64_t(i) * 2 * X;
      ops::gelu_tanh_gate(g, g + X, size_t(X));
      std::copy_n(g, X, act.data() + int64_t(i) * X);
    }
    y.resize(size_t(n) * H);
    linear(act.data(), n, w.expert_down[size_t(e)], y.data(), rows_independent);
    for (int i = 0; i < n; ++i) {
      float* o = out + int64_t(group[size_t(i)].first) * H;
      const float wgt = group[size_t(i)].second;
      const float* yi = y.data() + int64_t(i) * H;
      for (int k = 0; k < H; ++k) o[k] += wgt * yi[k];
    }
  }
}

}  // namespace splitdec
