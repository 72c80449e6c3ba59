// Added tokens of a Hugging Face tokenizer.json, found in text before the
// model runs, as HF's AddedVocabulary does: leftmost-longest matches, then
// single_word / lstrip / rstrip applied to each match in turn.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace splitdec::hf {

struct AddedToken {
  int id = 0;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool special = false;
};

// One set of patterns (HF keeps two: raw and normalized).
class AddedTokenMatcher {
 public:
  // `pattern` is what is searched for (the content, normalized for a
  // normalized token); `token` indexes the caller's token list.
  void add(const std::string& pattern, int token);
  bool empty() const { return nodes_.size() <= 1; }

  struct Piece {
    int token;  // -1: plain text for the model
    size_t begin;
    size_t end;
  };
  // Cuts `text` into added tokens and the text between them (no empty pieces).
  std::vector<Piece> split(std::string_view text, const std::vector<AddedToken>& tokens) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int>> next;
    int token = -1;
  };
  int child(int node, unsigned char b) const;
  std::vector<Node> nodes_{1};
  int root_next_[256] = {};  // 0: none (the root is never a child)
};

}  // namespace splitdec::hf
