// Log probabilities of chosen tokens, as OpenAI's `logprobs` report them:
// over the distribution the sampler draws from (the logits after logit_bias
// and the penalties, divided by the temperature; greedy: temperature 1),
// before top-k / top-p / min-p cut it.
#pragma once

#include <utility>
#include <vector>

namespace splitdec {

struct TokenLogprob {
  int token = -1;
  float logprob = 0.f;
  std::vector<std::pair<int, float>> top;  // the `top` most likely tokens, most likely first (ties: lower id first)
};

// `logits` [vocab] as the sampler left them; `temperature` <= 0 reads as 1.
// Tokens at -inf (banned) are never among the top ones.
TokenLogprob token_logprob(const std::vector<float>& logits, float temperature, int token, int top);

}  // namespace splitdec
