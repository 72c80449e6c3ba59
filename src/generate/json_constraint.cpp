#include "generate/json_constraint.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace splitdec {

JsonConstraint::JsonConstraint(std::shared_ptr<const JsonGrammar> grammar, std::shared_ptr<const TokenTrie> vocabulary,
                               std::vector<int> stop_tokens)
    : grammar_(std::move(grammar)),
      vocab_(std::move(vocabulary)),
      stop_tokens_(std::move(stop_tokens)),
      matcher_(*grammar_),
      state_(matcher_.start()) {}

bool JsonConstraint::is_stop(int token) const {
  return std::find(stop_tokens_.begin(), stop_tokens_.end(), token) != stop_tokens_.end();
}

bool JsonConstraint::allows(int token) const {
  if (is_stop(token)) return matcher_.can_end(state_);
  const std::string* text = vocab_->text(token);
  if (!text) return false;
  JsonMatcher::State probe = state_;
  return matcher_.feed(probe, *text);
}

void JsonConstraint::mask(std::vector<float>& logits) const {
  std::vector<char> allowed(logits.size(), 0);
  if (!matcher_.finished(state_)) {
    const auto& nodes = vocab_->nodes();
    const auto& tokens = vocab_->tokens();
    const size_t depths = size_t(vocab_->max_depth()) + 1;
    by_depth_.resize(depths);
    // Inside a string most of the vocabulary is allowed: the walk then
    // steps the string's frame alone (the lane) until a byte would end it.
    struct Lane {
      bool on = false;
      JsonMatcher::Frame top;
    };
    std::vector<Lane> lane(depths);
    // Where each depth's state is: its slot, or `closed` below.
    std::vector<const JsonMatcher::State*> at(depths);
    by_depth_[0] = state_;
    at[0] = &by_depth_[0];
    if (matcher_.in_string(state_)) lane[0] = {true, state_.stacks[0].back()};
    // Whatever the string held, the parse after its closing quote is the
    // same (the string's frame is gone): computed once, on the first close.
    JsonMatcher::State closed;
    bool have_closed = false;
    size_t i = 0;
    while (i < nodes.size()) {
      const TokenTrie::Node& n = nodes[i];
      const size_t d = n.depth;
      bool ok;
      if (lane[d - 1].on) {
        JsonMatcher::Frame top = lane[d - 1].top;
        const int r = matcher_.string_step(top, n.byte);
        lane[d] = {r == 1, top};
        ok = r != 0;
        if (r == 2) {  // the string ends here: the whole parse from now on
          if (!have_closed) {
            JsonMatcher::State before = state_;
            before.stacks[0].back() = lane[d - 1].top;
            have_closed = true;
            if (!matcher_.step(before, n.byte, closed)) closed.stacks.clear();
          }
          ok = !closed.stacks.empty();
          at[d] = &closed;
        }
      } else {
        lane[d].on = false;
        ok = matcher_.step(*at[d - 1], n.byte, by_depth_[d]);
        at[d] = &by_depth_[d];
      }
      if (!ok) {
        i = n.end;  // no token under this prefix continues the document
        continue;
      }
      for (uint32_t k = 0; k < n.token_count; ++k) {
        const int t = tokens[n.first_token + k];
        if (size_t(t) < allowed.size()) allowed[size_t(t)] = 1;
      }
      ++i;
    }
  }
  // After the walk: a stop token whose text is in the vocabulary's trie
  // still ends the reply, so it is allowed only where the document may end.
  for (int t : stop_tokens_)
    if (t >= 0 && size_t(t) < logits.size()) allowed[size_t(t)] = matcher_.can_end(state_);
  for (size_t t = 0; t < logits.size(); ++t)
    if (!allowed[t]) logits[t] = -std::numeric_limits<float>::infinity();
}

void JsonConstraint::accept(int token) {
  if (is_stop(token)) return;
  const std::string* text = vocab_->text(token);
  // The sampler only returns allowed tokens; anything else is a bug here.
  if (!text || !matcher_.feed(state_, *text))
    throw Error("structured output: token " + std::to_string(token) + " was chosen but does not continue the JSON");
}

}  // namespace splitdec
