// The vocabulary as the text each token writes into a reply, in a trie laid
// out in preorder: a node's subtree is the range up to its `end`, so a walk
// that refuses a prefix skips every token under it in one jump. Built once
// per tokenizer and shared (read-only) by every request that constrains its
// tokens.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace splitdec {

class Tokenizer;

class TokenTrie {
 public:
  struct Node {
    uint8_t byte = 0;
    uint16_t depth = 0;        // 1 for a first byte
    uint32_t end = 0;          // one past the last node of this subtree
    uint32_t first_token = 0;  // tokens ending here: tokens()[first_token, first_token + token_count)
    uint32_t token_count = 0;
  };
  // Tokens [0, vocab_size) that write text; special tokens, tokens that
  // write nothing and ids past the tokenizer's pieces are left out.
  static std::shared_ptr<const TokenTrie> build(const Tokenizer& tokenizer, int vocab_size);
  // From texts directly (`usable[t]` false: left out); for tests.
  static std::shared_ptr<const TokenTrie> from_texts(std::vector<std::string> texts, std::vector<bool> usable);

  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<int>& tokens() const { return tokens_; }
  int max_depth() const { return max_depth_; }
  int vocab_size() const { return int(text_.size()); }
  // nullptr: the token is left out.
  const std::string* text(int token) const {
    return token >= 0 && size_t(token) < text_.size() && usable_[size_t(token)] ? &text_[size_t(token)] : nullptr;
  }

 private:
  std::vector<Node> nodes_;
  std::vector<int> tokens_;
  std::vector<std::string> text_;
  std::vector<bool> usable_;
  int max_depth_ = 0;
};

}  // namespace splitdec
