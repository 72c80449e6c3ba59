// Structured output: the tokens a request may choose are those whose text
// keeps the reply a prefix of a document its JsonGrammar generates; a stop
// token only once the document is whole, and nothing else after that.
#pragma once

#include <memory>
#include <vector>

#include "generate/json_matcher.h"
#include "generate/sampler.h"
#include "generate/token_trie.h"

namespace splitdec {

class JsonConstraint : public TokenConstraint {
 public:
  JsonConstraint(std::shared_ptr<const JsonGrammar> grammar, std::shared_ptr<const TokenTrie> vocabulary,
                 std::vector<int> stop_tokens);

  bool allows(int token) const override;
  // One walk over the trie from the current state (a refused prefix skips
  // its whole subtree).
  void mask(std::vector<float>& logits) const override;
  void accept(int token) override;

  bool complete() const override { return matcher_.finished(state_); }

 private:
  bool is_stop(int token) const;

  std::shared_ptr<const JsonGrammar> grammar_;
  std::shared_ptr<const TokenTrie> vocab_;
  std::vector<int> stop_tokens_;
  JsonMatcher matcher_;
  JsonMatcher::State state_;
  // The walk's state per trie depth, kept between calls for their storage.
  mutable std::vector<JsonMatcher::State> by_depth_;
};

}  // namespace splitdec
