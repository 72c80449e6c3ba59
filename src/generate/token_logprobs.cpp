#include "generate/token_logprobs.h"

#include <algorithm>
#include <cmath>

namespace splitdec {

TokenLogprob token_logprob(const std::vector<float>& logits, float temperature, int token, int top) {
  const double t = temperature > 0 ? double(temperature) : 1.0;
  double mx = -INFINITY;
  for (float x : logits) mx = std::max(mx, double(x));
  double sum = 0;
  for (float x : logits) sum += std::exp((double(x) - mx) / t);
  const double log_norm = mx / t + std::log(sum);
  auto logprob = [&](int id) { return float(double(logits[size_t(id)]) / t - log_norm); };

  TokenLogprob out;
  out.token = token;
  out.logprob = logprob(token);
  // The `top` best in one pass, kept sorted (top <= 20): no vocabulary-sized
  // buffer per token. Better: a higher logit, or the same one at a lower id.
  const size_t k = size_t(std::max(0, top));
  std::vector<int> best;
  best.reserve(k + 1);
  auto better = [&](int a, int b) { return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b); };
  for (int id = 0; k > 0 && id < int(logits.size()); ++id) {
    if (!std::isfinite(logits[size_t(id)])) continue;
    if (best.size() == k && !better(id, best.back())) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), id, better), id);
    if (best.size() > k) best.pop_back();
  }
  for (int id : best) out.top.emplace_back(id, logprob(id));
  return out;
}

}  // namespace splitdec
