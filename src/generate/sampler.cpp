#include "generate/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <unordered_map>

#include "core/error.h"

namespace splitdec {

void SamplingOptions::validate() const {
  if (!(temperature >= 0.f) || !std::isfinite(temperature)) throw InputError("--temperature must be >= 0");
  if (top_k < 0) throw InputError("--top-k must be >= 0");
  if (!(top_p > 0.f && top_p <= 1.f)) throw InputError("--top-p must lie in (0, 1]");
  if (!(min_p >= 0.f && min_p < 1.f)) throw InputError("--min-p must lie in [0, 1)");
  if (!(repetition_penalty > 0.f) || !std::isfinite(repetition_penalty)) throw InputError("--repetition-penalty must be > 0");
  if (!(presence_penalty >= -2.f && presence_penalty <= 2.f)) throw InputError("presence_penalty must lie in [-2, 2]");
  if (!(frequency_penalty >= -2.f && frequency_penalty <= 2.f)) throw InputError("frequency_penalty must lie in [-2, 2]");
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0) throw InputError("logit_bias: token id " + std::to_string(id) + " is negative");
    if (!(bias >= -100.f && bias <= 100.f))
      throw InputError("logit_bias: the bias of token " + std::to_string(id) + " must lie in [-100, 100]");
  }
}

void SamplingOptions::check_vocabulary(int vocab_size) const {
  int64_t banned = 0;
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0 || id >= vocab_size)
      throw InputError("logit_bias: token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                       std::to_string(vocab_size) + ")");
    banned += bias == -100.f;
  }
  if (banned >= vocab_size) throw InputError("logit_bias: every token of the vocabulary is banned (-100)");
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

void apply_logit_bias(std::vector<float>& logits, const std::map<int, float>& bias) {
  for (const auto& [id, b] : bias) {
    if (id < 0 || size_t(id) >= logits.size()) continue;  // check_vocabulary refused these before any step
    float& l = logits[size_t(id)];
    // Added as OpenAI says, except that -100 is a ban whatever the logit:
    // a greedy choice must never land on a banned token.
    l = b == -100.f ? -std::numeric_limits<float>::infinity() : l + b;
  }
}

void apply_presence_frequency_penalties(std::vector<float>& logits, const std::vector<int>& generated, float presence,
                                        float frequency) {
  if (presence == 0.f && frequency == 0.f) return;
  std::unordered_map<int, int> count;
  for (int t : generated)
    if (t >= 0 && size_t(t) < logits.size()) ++count[t];
  for (const auto& [t, n] : count) logits[size_t(t)] -= presence + frequency * float(n);
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

int Sampler::choose(std::vector<float>& logits, const std::vector<int>& history, const std::vector<int>& generated,
                    const TokenConstraint* constraint) {
  // llama.cpp's order: the bias first, then the penalties, then the sampler's transforms.
  apply_logit_bias(logits, o_.logit_bias);
  apply_repetition_penalty(logits, history, o_.repetition_penalty);
  apply_presence_frequency_penalties(logits, generated, o_.presence_penalty, o_.frequency_penalty);
  const int first = pick(logits);
  if (!constraint || constraint->allows(first)) return first;
  std::vector<float> masked = logits;
  constraint->mask(masked);
  if (std::none_of(masked.begin(), masked.end(), [](float x) { return x > -std::numeric_limits<float>::infinity(); }))
    return -1;
  return pick(masked);
}

// std::max_element's index: the first of the largest. Why not it: GCC keeps
// the running maximum behind the iterator and reloads it every element (a
// load-to-compare chain, ~2 ns per logit: 1.2 ms of a 262K vocabulary, on
// the thread that runs a batch's sampling alone). Eight independent maxima
// then a search for the first equal one give the same index.
int greedy_choice(const std::vector<float>& logits) {
  constexpr size_t kLanes = 8;
  const size_t n = logits.size();
  if (n < kLanes) return int(std::max_element(logits.begin(), logits.end()) - logits.begin());
  float lane[kLanes];
  std::copy_n(logits.begin(), kLanes, lane);
  size_t i = kLanes;
  for (; i + kLanes <= n; i += kLanes)
    for (size_t j = 0; j < kLanes; ++j) lane[j] = lane[j] < logits[i + j] ? logits[i + j] : lane[j];
  float best = *std::max_element(lane, lane + kLanes);
  for (; i < n; ++i) best = best < logits[i] ? logits[i] : best;
  const auto at = std::find(logits.begin(), logits.end(), best);
  // Only a NaN can hide the maximum from the lanes (the caller refuses those).
  return at != logits.end() ? int(at - logits.begin()) : int(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

int Sampler::pick(const std::vector<float>& logits) {
  if (!o_.sample) return greedy_choice(logits);
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
