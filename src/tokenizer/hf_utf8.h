// UTF-8 helpers for the Hugging Face tokenizer: scalar stepping and the
// Unicode White_Space set that HF's added-token lstrip/rstrip use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace splitdec::hf {

// Length of the UTF-8 sequence starting with byte `b` (1 for a stray byte,
// so that malformed input still advances).
inline size_t utf8_length(unsigned char b) {
  if (b < 0x80) return 1;
  if ((b >> 5) == 0x6) return 2;
  if ((b >> 4) == 0xE) return 3;
  if ((b >> 3) == 0x1E) return 4;
  return 1;
}

// The scalar at s[i] (which must start a sequence) and its byte length.
inline uint32_t utf8_decode(std::string_view s, size_t i, size_t* len) {
  const auto b = static_cast<unsigned char>(s[i]);
  size_t n = utf8_length(b);
  if (i + n > s.size()) n = 1;
  *len = n;
  if (n == 1) return b;
  uint32_t cp = b & (0xFF >> (n + 1));
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  return cp;
}

// Strict UTF-8 (no overlongs, surrogates or scalars past U+10FFFF), as Rust's String::from_utf8.
inline bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    uint32_t cp = 0, min = 0;
    if (b < 0x80) n = 1, cp = b;
    else if ((b >> 5) == 0x6) n = 2, cp = b & 0x1F, min = 0x80;
    else if ((b >> 4) == 0xE) n = 3, cp = b & 0x0F, min = 0x800;
    else if ((b >> 3) == 0x1E) n = 4, cp = b & 0x07, min = 0x10000;
    else return false;
    if (i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if ((c & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    if (n > 1 && (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))) return false;
    i += n;
  }
  return true;
}

// Rust's char::is_whitespace (Unicode White_Space).
inline bool is_unicode_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Replaces every occurrence of `from` (non-empty) with `to`, left to right.
inline std::string replace_all(std::string_view s, const std::string& from, const std::string& to) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string_view::npos; pos = hit + from.size()) {
    out.append(s.substr(pos, hit - pos));
    out += to;
  }
  out.append(s.substr(pos));
  return out;
}

}  // namespace splitdec::hf
