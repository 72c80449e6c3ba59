#include "generate/token_logprobs.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>

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
  std::vector<int> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  const size_t k = std::min(ids.size(), size_t(std::max(0, top)));
  std::partial_sort(ids.begin(), ids.begin() + std::ptrdiff_t(k), ids.end(),
                    [&](int a, int b) { return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b); });
  for (size_t i = 0; i < k && std::isfinite(logits[size_t(ids[i])]); ++i) out.top.emplace_back(ids[i], logprob(ids[i]));
  return out;
}

}  // namespace splitdec
