#include "model/reference_gemma4_layers.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace splitdec::ref {

namespace {

// y[o] = W[o] . x for one row, in double.
std::vector<double> matvec(const WeightMatrix& w, const double* x) {
  std::vector<double> y(static_cast<size_t>(w.out));
  std::vector<float> row(static_cast<size_t>(w.in));
  for (int o = 0; o < w.out; ++o) {
    w.row_f32(o, row.data());
    double s = 0;
    for (int i = 0; i < w.in; ++i) s += double(row[size_t(i)]) * x[i];
    y[size_t(o)] = s;
  }
  return y;
}

// Gemma4RMSNorm: x * (mean(x^2) + eps)^-0.5, times w when given (times
// 1 + w where the family adds one).
void rms(double* x, int n, double eps, const float* w, bool adds_one) {
  double ms = 0;
  for (int i = 0; i < n; ++i) ms += x[i] * x[i];
  const double inv = 1.0 / std::sqrt(ms / n + eps);
  for (int i = 0; i < n; ++i) x[i] *= inv * (w ? (adds_one ? 1.0 + w[i] : double(w[i])) : 1.0);
}

double gelu(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

std::vector<double> to_double(const float* x, int n) { return std::vector<double>(x, x + n); }

}  // namespace

std::vector<double> per_layer_inputs(const ModelConfig& c, const ModelWeights& w, const int* table_tokens,
                                     const float* embeddings, int rows) {
  const int L = c.num_layers, P = c.per_layer_dim, H = c.hidden_size;
  std::vector<double> out(size_t(L) * size_t(rows) * size_t(P));
  std::vector<float> table_row(size_t(L) * size_t(P));
  // Hugging Face multiplies by the scale cast to the table's type.
  const double table_scale = double(round_to_dtype(float(std::sqrt(double(P))), c.embed_scale_rounded ? w.per_layer_table.dtype() : DType::F32));
  for (int r = 0; r < rows; ++r) {
    const std::vector<double> e = to_double(embeddings + int64_t(r) * H, H);
    std::vector<double> proj = matvec(w.per_layer_model_projection, e.data());
    for (double& x : proj) x /= std::sqrt(double(H));
    w.per_layer_table.row_f32(table_tokens[r], table_row.data());
    for (int l = 0; l < L; ++l) {
      double* p = proj.data() + int64_t(l) * P;
      rms(p, P, c.rms_norm_eps, w.per_layer_projection_norm.data(), c.norm_adds_one);
      for (int k = 0; k < P; ++k)
        out[(size_t(l) * rows + size_t(r)) * P + size_t(k)] =
            (p[k] + double(table_row[size_t(l) * P + size_t(k)]) * table_scale) / std::sqrt(2.0);
    }
  }
  return out;
}

std::vector<double> add_per_layer_input(const ModelConfig& c, const LayerWeights& w, const double* input, const float* hidden,
                                        int rows) {
  const int H = c.hidden_size, P = c.per_layer_dim;
  std::vector<double> out(size_t(rows) * size_t(H));
  for (int r = 0; r < rows; ++r) {
    const std::vector<double> h = to_double(hidden + int64_t(r) * H, H);
    std::vector<double> g = matvec(w.per_layer_input_gate, h.data());
    for (int k = 0; k < P; ++k) g[size_t(k)] = gelu(g[size_t(k)]) * input[int64_t(r) * P + k];
    std::vector<double> y = matvec(w.per_layer_projection, g.data());
    rms(y.data(), H, c.rms_norm_eps, w.post_per_layer_input_norm.data(), c.norm_adds_one);
    for (int k = 0; k < H; ++k) out[size_t(r) * H + size_t(k)] = h[size_t(k)] + y[size_t(k)];
  }
  return out;
}

std::vector<double> mixture_of_experts(const ModelConfig& c, const LayerSpec& spec, const LayerWeights& w,
                                       const float* residual, const float* expert_input, int rows) {
  const int H = c.hidden_size, E = spec.num_experts, K = spec.top_k_experts, X = spec.expert_intermediate_size;
  std::vector<double> out(size_t(rows) * size_t(H), 0.0);
  for (int r = 0; r < rows; ++r) {
    // Gemma4TextRouter: weightless norm, * scale * hidden^-0.5, proj, softmax, top-k, renormalised, * per-expert scale.
    std::vector<double> x = to_double(residual + int64_t(r) * H, H);
    rms(x.data(), H, c.rms_norm_eps, nullptr, false);
    for (int k = 0; k < H; ++k) x[size_t(k)] *= double(w.router_scale[size_t(k)]) / std::sqrt(double(H));
    std::vector<double> p = matvec(w.router, x.data());
    const double m = *std::max_element(p.begin(), p.end());
    double sum = 0;
    for (double& v : p) sum += (v = std::exp(v - m));
    for (double& v : p) v /= sum;
    std::vector<int> order(static_cast<size_t>(E));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[size_t(a)] > p[size_t(b)]; });
    double kept = 0;
    for (int k = 0; k < K; ++k) kept += p[size_t(order[size_t(k)])];
    // Gemma4TextExperts: gate_up -> gelu(gate) * up -> down, weighted.
    const std::vector<double> in = to_double(expert_input + int64_t(r) * H, H);
    for (int k = 0; k < K; ++k) {
      const int e = order[size_t(k)];
      const double weight = p[size_t(e)] / kept * double(w.per_expert_scale[size_t(e)]);
      std::vector<double> gu = matvec(w.expert_gate_up[size_t(e)], in.data());
      std::vector<double> act(static_cast<size_t>(X));
      for (int i = 0; i < X; ++i) act[size_t(i)] = gelu(gu[size_t(i)]) * gu[size_t(X + i)];
      const std::vector<double> y = matvec(w.expert_down[size_t(e)], act.data());
      for (int i = 0; i < H; ++i) out[size_t(r) * H + size_t(i)] += weight * y[size_t(i)];
    }
  }
  return out;
}

}  // namespace splitdec::ref
