// Choosing the next token: greedy, or sampling with temperature, top-k,
// top-p, min-p, from a seeded generator, after OpenAI's logit bias and
// presence / frequency penalties and HF's repetition penalty.
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <vector>

namespace splitdec {

struct SamplingOptions {
  float temperature = 0.f;  // 0: greedy (unless another sampling flag turns sampling on)
  int top_k = 0;            // 0: off
  float top_p = 1.f;        // 1: off
  float min_p = 0.f;        // 0: off
  float repetition_penalty = 1.f;  // 1: off; applies to greedy too
  // OpenAI's: token id -> bias in [-100, 100] added to its logit first;
  // -100 bans the token outright (its logit becomes -inf).
  std::map<int, float> logit_bias;
  // OpenAI's, in [-2, 2] (0: off), over the tokens this request generated:
  // logit -= presence * (count > 0) + frequency * count. Greedy too.
  float presence_penalty = 0.f;
  float frequency_penalty = 0.f;
  uint64_t seed = 0;
  bool sample = false;      // set when any of temperature / top-k / top-p / min-p was asked for

  // Throws InputError naming the flag and its range.
  void validate() const;
  // Throws InputError when a logit_bias id is outside [0, vocab_size) or the
  // bias bans every token (nothing would be left to choose).
  void check_vocabulary(int vocab_size) const;
  bool operator==(const SamplingOptions&) const = default;
};

// A rule on which token may come next (structured output: json_constraint.h).
class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  virtual bool allows(int token) const = 0;
  // Sets the logit of every token the rule refuses to -inf.
  virtual void mask(std::vector<float>& logits) const = 0;
  // `token` was chosen: the rule moves past it.
  virtual void accept(int token) = 0;
  // Nothing may follow what was accepted (a reply with no stop token to
  // choose then ends as if it had chosen one).
  virtual bool complete() const { return false; }
};

class Sampler {
 public:
  explicit Sampler(const SamplingOptions& options);
  // `logits` [vocab] is modified in place (the bias and the penalties, not
  // a constraint's mask). `history`: tokens so far (prompt and generated)
  // for the repetition penalty; `generated`: this request's tokens so far,
  // for the presence and frequency penalties.
  //
  // With a `constraint`, a token it refuses is never returned: the token
  // drawn first is kept when allowed, else the constraint's mask is applied
  // (to a copy) and the choice made again, as llama.cpp does with grammars.
  // Greedy gives the allowed token of highest logit either way; sampling
  // draws a second time. Returns -1 when the constraint allows no token.
  int choose(std::vector<float>& logits, const std::vector<int>& history, const std::vector<int>& generated = {},
             const TokenConstraint* constraint = nullptr);

 private:
  int pick(const std::vector<float>& logits);

  SamplingOptions o_;
  std::mt19937_64 rng_;
};

// The greedy choice: the index of the first largest logit, as
// std::max_element gives it (which it is tested against), faster.
int greedy_choice(const std::vector<float>& logits);

// HF's order: repetition penalty (divide positive logits, multiply negative
// ones, once per distinct token seen).
void apply_repetition_penalty(std::vector<float>& logits, const std::vector<int>& history, float penalty);

// OpenAI's logit_bias: adds each bias to its token's logit; -100 sets it to -inf.
void apply_logit_bias(std::vector<float>& logits, const std::map<int, float>& bias);

// OpenAI's penalties: logit[t] -= presence * (count[t] > 0) + frequency * count[t],
// counting t in `generated`.
void apply_presence_frequency_penalties(std::vector<float>& logits, const std::vector<int>& generated, float presence,
                                        float frequency);

// The probabilities sampling draws from after temperature, top-k, top-p and
// min-p (zero outside the kept set). Exposed for the distribution tests.
std::vector<double> sampling_distribution(const std::vector<float>& logits, const SamplingOptions& o);

}  // namespace splitdec
