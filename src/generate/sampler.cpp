#include "generate/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace splitdec {

void SamplingOptions::validate() const {
  if (!(temperature >= 0.f) || !std::isfinite(temperature)) throw InputError("--temperature must be >= 0");
  if (top_k < 0) throw InputError("--top-k must be >= 0");
  if (!(top_p > 0.f && top_p <= 1.f)) throw InputError("--top-p must lie in (0, 1]");
  if (!(min_p >= 0.f && min_p < 1.f)) throw InputError("--min-p must lie in [0, 1)");
  if (!(repetition_penalty > 0.f) || !std::isfinite(repetition_penalty)) throw InputError("--repetition-penalty must be > 0");
}

Sampler::Sampler(const SamplingOptions& o) : o_(o), rng_(o.seed) { o.validate(); }

void apply_repetition_penalty(std::vector<float>& logits, const std::vector<int>& history, float penalty) {
  if (penalty == 1.f) return;
  std::vector<bool> seen(logits.size(), false);
  for (int t : history) {
    if (t < 0 || size_t(t) >= logits.size() || seen[size_t(t)]) continue;
    seen[size_t(t)] = true;
    float& l = logits[size_t(t)];
    l = l > 0 ? l / penalty : l * penalty;
  }
}

std::vector<double> sampling_distribution(const std::vector<float>& logits, const SamplingOptions& o) {
  const size_t V = logits.size();
  const double temp = o.temperature > 0 ? o.temperature : 1.0;
  std::vector<size_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return logits[a] > logits[b]; });
  size_t keep = V;
  if (o.top_k > 0) keep = std::min(keep, size_t(o.top_k));
  std::vector<double> p(V, 0.0);
  const double m = logits[order[0]] / temp;
  double z = 0;
  for (size_t k = 0; k < keep; ++k) z += (p[order[k]] = std::exp(logits[order[k]] / temp - m));
  for (size_t k = 0; k < keep; ++k) p[order[k]] /= z;
  if (o.top_p < 1.f) {  // smallest prefix whose mass reaches top_p (always at least one token)
    double cum = 0;
    size_t k = 0;
    for (; k < keep; ++k) {
      cum += p[order[k]];
      if (cum >= o.top_p) {
        ++k;
        break;
      }
    }
    keep = std::max<size_t>(1, std::min(keep, k));
  }
  if (o.min_p > 0.f) {  // drop tokens below min_p times the top probability
    const double floor = o.min_p * p[order[0]];
    size_t k = 1;
    while (k < keep && p[order[k]] >= floor) ++k;
    keep = k;
  }
  for (size_t k = keep; k < V; ++k) p[order[k]] = 0;
  const double mass = std::accumulate(p.begin(), p.end(), 0.0);
  for (double& x : p) x /= mass;
  return p;
}

int Sampler::choose(std::vector<float>& logits, const std::vector<int>& history) {
  apply_repetition_penalty(logits, history, o_.repetition_penalty);
  if (!o_.sample) return int(std::max_element(logits.begin(), logits.end()) - logits.begin());
  const std::vector<double> p = sampling_distribution(logits, o_);
  // Inverse-CDF draw with our own uniform so the seed gives the same tokens
  // with every standard library.
  const double u = double(rng_() >> 11) * 0x1.0p-53;
  double cum = 0;
  int last = 0;
  for (size_t t = 0; t < p.size(); ++t) {
    if (p[t] == 0) continue;
    last = int(t);
    cum += p[t];
    if (u < cum) return int(t);
  }
  return last;
}

}  // namespace splitdec
