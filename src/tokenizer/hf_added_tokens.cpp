#include "tokenizer/hf_added_tokens.h"

#include <algorithm>

#include "tokenizer/hf_utf8.h"

namespace splitdec::hf {

namespace {

// The scalar that ends s[0, end) (end > 0).
uint32_t last_scalar(std::string_view s, size_t end) {
  size_t i = end - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80 && end - i < 4) --i;
  size_t len = 0;
  return utf8_decode(s, i, &len);
}

// HF's is_word_character for single_word. Exact for ASCII; any other scalar
// that is not white space counts as a word character (no Unicode tables
// here; Gemma's files set single_word on no token).
bool is_word_scalar(uint32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  return !is_unicode_space(c);
}

}  // namespace

int AddedTokenMatcher::child(int node, unsigned char b) const {
  if (node == 0) return root_next_[b];
  for (const auto& [byte, to] : nodes_[node].next)
    if (byte == b) return to;
  return 0;
}

void AddedTokenMatcher::add(const std::string& pattern, int token) {
  if (pattern.empty()) return;
  int node = 0;
  for (unsigned char b : pattern) {
    int to = child(node, b);
    if (to == 0) {
      to = static_cast<int>(nodes_.size());
      nodes_.emplace_back();
      if (node == 0) root_next_[b] = to;
      else nodes_[node].next.emplace_back(b, to);
    }
    node = to;
  }
  // A repeated pattern keeps its first token.
  if (nodes_[node].token < 0) nodes_[node].token = token;
}

std::vector<AddedTokenMatcher::Piece> AddedTokenMatcher::split(std::string_view text,
                                                               const std::vector<AddedToken>& tokens) const {
  std::vector<Piece> pieces;
  size_t start_offset = 0;
  for (size_t i = 0; i < text.size();) {
    // Longest match starting at i.
    int node = 0, found = -1;
    size_t found_end = 0;
    for (size_t j = i; j < text.size(); ++j) {
      node = child(node, static_cast<unsigned char>(text[j]));
      if (node == 0) break;
      if (nodes_[node].token >= 0) found = nodes_[node].token, found_end = j + 1;
    }
    if (found < 0) {
      ++i;
      continue;
    }
    size_t start = i, stop = found_end;
    i = found_end;  // matches never overlap, kept or not (as Aho-Corasick's find_iter)
    const AddedToken& t = tokens[static_cast<size_t>(found)];
    if (t.single_word) {
      const bool start_ok = start == 0 || !is_word_scalar(last_scalar(text, start));
      size_t len = 0;
      const bool stop_ok = stop == text.size() || !is_word_scalar(utf8_decode(text, stop, &len));
      if (!start_ok || !stop_ok) continue;
    }
    if (t.lstrip) {
      size_t s = start;
      while (s > 0) {
        size_t b = s - 1;
        while (b > 0 && (static_cast<unsigned char>(text[b]) & 0xC0) == 0x80) --b;
        size_t len = 0;
        if (!is_unicode_space(utf8_decode(text, b, &len))) break;
        s = b;
      }
      // Spaces an earlier match already took stay with it.
      start = std::max(s, start_offset);
    }
    if (t.rstrip) {
      size_t len = 0;
      while (stop < text.size() && is_unicode_space(utf8_decode(text, stop, &len))) stop += len;
    }
    if (start_offset < start) pieces.push_back({-1, start_offset, start});
    pieces.push_back({found, start, stop});
    start_offset = stop;
    // rstrip may have taken text past the next candidate start.
    i = std::max(i, stop);
  }
  if (start_offset < text.size()) pieces.push_back({-1, start_offset, text.size()});
  return pieces;
}

}  // namespace splitdec::hf
