// Choosing the next token: greedy, or sampling with temperature, top-k,
// top-p, min-p, and a repetition penalty, from a seeded generator.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace splitdec {

struct SamplingOptions {
  float temperature = 0.f;  // 0: greedy (unless another sampling flag turns sampling on)
  int top_k = 0;            // 0: off
  float top_p = 1.f;        // 1: off
  float min_p = 0.f;        // 0: off
  float repetition_penalty = 1.f;  // 1: off; applies to greedy too
  uint64_t seed = 0;
  bool sample = false;      // set when any of temperature / top-k / top-p / min-p was asked for

  // Throws InputError naming the flag and its range.
  void validate() const;
  bool operator==(const SamplingOptions&) const = default;
};

class Sampler {
 public:
  explicit Sampler(const SamplingOptions& options);
  // `logits` [vocab] is modified in place. `history`: tokens so far (prompt
  // and generated) for the repetition penalty.
  int choose(std::vector<float>& logits, const std::vector<int>& history);

 private:
  SamplingOptions o_;
  std::mt19937_64 rng_;
};

// HF's order: repetition penalty (divide positive logits, multiply negative
// ones, once per distinct token seen).
void apply_repetition_penalty(std::vector<float>& logits, const std::vector<int>& history, float penalty);

// The probabilities sampling draws from after temperature, top-k, top-p and
// min-p (zero outside the kept set). Exposed for the distribution tests.
std::vector<double> sampling_distribution(const std::vector<float>& logits, const SamplingOptions& o);

}  // namespace splitdec
