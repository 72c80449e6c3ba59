#include "generate/token_trie.h"

#include <algorithm>
#include <numeric>

#include "tokenizer/tokenizer.h"

namespace splitdec {

namespace {

// Longer token texts are left out (no real vocabulary has them; depths stay small).
constexpr size_t kMaxTokenBytes = 1024;

// A byte-fallback piece ("<0xE4>") writes that one byte.
int fallback_byte(const std::string& piece) {
  if (piece.size() != 6 || piece.compare(0, 3, "<0x") != 0 || piece[5] != '>') return -1;
  int v = 0;
  for (int i = 3; i < 5; ++i) {
    const char c = piece[size_t(i)];
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

}  // namespace

std::shared_ptr<const TokenTrie> TokenTrie::build(const Tokenizer& tok, int vocab_size) {
  std::vector<std::string> texts(size_t(std::max(vocab_size, 0)));
  std::vector<bool> usable(texts.size(), false);
  // A token's text is read after an anchor token, as in the middle of a
  // reply: decoders that drop a leading space at the start of the text
  // (SentencePiece's dummy prefix, a Strip step) keep it there.
  int anchor = -1;
  for (const char* a : {"a", "{", "0"}) {
    anchor = tok.piece_id(a);
    if (anchor >= 0 && !tok.is_special(anchor)) break;
    anchor = -1;
  }
  const std::string anchor_text = anchor >= 0 ? tok.decode({anchor}) : std::string();
  const int pieces = std::min(vocab_size, tok.piece_count());
  for (int t = 0; t < pieces; ++t) {
    if (tok.is_special(t)) continue;
    const int byte = fallback_byte(tok.piece(t));
    std::string text;
    if (byte >= 0) {
      text.assign(1, char(byte));
    } else if (anchor >= 0) {
      text = tok.decode({anchor, t});
      if (text.compare(0, anchor_text.size(), anchor_text) != 0) continue;  // the pair did not decode as a concatenation
      text.erase(0, anchor_text.size());
    } else {
      text = tok.decode({t});
    }
    if (text.empty()) continue;
    texts[size_t(t)] = std::move(text);
    usable[size_t(t)] = true;
  }
  return from_texts(std::move(texts), std::move(usable));
}

std::shared_ptr<const TokenTrie> TokenTrie::from_texts(std::vector<std::string> texts_in, std::vector<bool> usable) {
  auto trie = std::make_shared<TokenTrie>();
  trie->text_ = std::move(texts_in);  // the vocabulary once, not a copy beside the caller's
  trie->usable_ = std::move(usable);
  const std::vector<std::string>& texts = trie->text_;
  trie->usable_.resize(texts.size(), false);
  std::vector<int> order;
  for (size_t t = 0; t < texts.size(); ++t)
    if (trie->usable_[t] && !texts[t].empty() && texts[t].size() <= kMaxTokenBytes) order.push_back(int(t));
    else trie->usable_[t] = false;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return texts[size_t(a)] < texts[size_t(b)]; });
  // Sorted texts give the trie in preorder: each text shares its longest
  // common prefix with the path open from the text before it.
  std::vector<uint32_t> path;  // node index per depth - 1 on the open path
  const std::string* prev = nullptr;
  auto close_to = [&](size_t depth) {
    while (path.size() > depth) {
      trie->nodes_[path.back()].end = uint32_t(trie->nodes_.size());
      path.pop_back();
    }
  };
  for (int t : order) {
    const std::string& s = texts[size_t(t)];
    size_t common = 0;
    if (prev) {
      const size_t limit = std::min({prev->size(), s.size(), path.size()});
      while (common < limit && (*prev)[common] == s[common]) ++common;
    }
    close_to(common);
    for (size_t d = common; d < s.size(); ++d) {
      Node n;
      n.byte = uint8_t(s[d]);
      n.depth = uint16_t(std::min<size_t>(d + 1, UINT16_MAX));
      path.push_back(uint32_t(trie->nodes_.size()));
      trie->nodes_.push_back(n);
    }
    Node& leaf = trie->nodes_[path.back()];
    if (leaf.token_count == 0) leaf.first_token = uint32_t(trie->tokens_.size());
    trie->tokens_.push_back(t);  // equal texts are adjacent in `order`
    ++leaf.token_count;
    trie->max_depth_ = std::max(trie->max_depth_, int(s.size()));
    prev = &s;
  }
  close_to(0);
  return trie;
}

}  // namespace splitdec
