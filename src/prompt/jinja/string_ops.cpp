#include "prompt/jinja/string_ops.h"

#include <algorithm>

#include "prompt/jinja/render_budget.h"

namespace splitdec::jinja {
namespace {

// The code points Python's str.isspace() accepts.
bool is_py_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Simple case mapping for the scripts chat text most often holds (Latin-1,
// Latin Extended-A, Greek, Cyrillic); other code points keep their case.
char32_t to_upper(char32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c < 0x80) return c;
  if ((c >= 0xE0 && c <= 0xFE && c != 0xF7) || (c >= 0x3B1 && c <= 0x3CB && c != 0x3C2) || (c >= 0x430 && c <= 0x44F))
    return c - 0x20;
  if (c == 0xFF) return 0x178;
  if ((c >= 0x100 && c <= 0x137) || (c >= 0x14A && c <= 0x177)) return c & ~char32_t{1};
  if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c % 2 == 0) ? c - 1 : c;
  if (c == 0x3C2) return 0x3A3;
  if (c == 0x3AC) return 0x386;
  if (c >= 0x3AD && c <= 0x3AF) return c - 0x25;
  if (c == 0x3CC) return 0x38C;
  if (c == 0x3CD || c == 0x3CE) return c - 0x3F;
  if (c >= 0x450 && c <= 0x45F) return c - 0x50;
  return c;
}

char32_t to_lower(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0x80) return c;
  if ((c >= 0xC0 && c <= 0xDE && c != 0xD7) || (c >= 0x391 && c <= 0x3AB && c != 0x3A2) || (c >= 0x410 && c <= 0x42F))
    return c + 0x20;
  if (c == 0x178) return 0xFF;
  if ((c >= 0x100 && c <= 0x137) || (c >= 0x14A && c <= 0x177)) return c | 1;
  if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c % 2 == 1) ? c + 1 : c;
  if (c == 0x386) return 0x3AC;
  if (c >= 0x388 && c <= 0x38A) return c + 0x25;
  if (c == 0x38C) return 0x3CC;
  if (c == 0x38E || c == 0x38F) return c + 0x3F;
  if (c >= 0x400 && c <= 0x40F) return c + 0x50;
  return c;
}

bool is_cased_letter(char32_t c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= 0x80 && (to_upper(c) != c || to_lower(c) != c));
}

std::string map_case(std::string_view s, char32_t (*f)(char32_t)) {
  std::u32string text = utf8_decode(s);
  for (char32_t& c : text) c = f(c);
  return utf8_encode(text);
}

}  // namespace

std::u32string utf8_decode(std::string_view s) {
  charge_scan(s.size());
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    int extra = b < 0x80 ? 0 : (b >> 5) == 6 ? 1 : (b >> 4) == 14 ? 2 : (b >> 3) == 30 ? 3 : -1;
    if (extra < 0 || i + static_cast<size_t>(extra) >= s.size()) {  // a stray or cut-off byte
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    char32_t c = extra == 0 ? b : extra == 1 ? (b & 0x1F) : extra == 2 ? (b & 0x0F) : (b & 0x07);
    bool ok = true;
    for (int k = 1; k <= extra; ++k) {
      const auto cont = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
      if ((cont & 0xC0) != 0x80) {
        ok = false;
        break;
      }
      c = (c << 6) | (cont & 0x3F);
    }
    if (!ok) {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    out.push_back(c);
    i += static_cast<size_t>(extra) + 1;
  }
  return out;
}

std::string utf8_encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) {
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      out += static_cast<char>(0xE0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (c >> 18));
      out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return out;
}

size_t code_point_count(std::string_view s) {
  return static_cast<size_t>(
      std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  const std::u32string text = utf8_decode(s);
  const std::u32string set = chars ? utf8_decode(*chars) : std::u32string();
  auto strip_it = [&](char32_t c) { return chars ? set.find(c) != std::u32string::npos : is_py_space(c); };
  size_t begin = 0, end = text.size();
  if (left)
    while (begin < end && strip_it(text[begin])) ++begin;
  if (right)
    while (end > begin && strip_it(text[end - 1])) --end;
  return utf8_encode(std::u32string_view(text).substr(begin, end - begin));
}

std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit) {
  charge_scan(s.size());
  std::vector<std::string> parts;
  if (sep) {
    size_t start = 0;
    for (;;) {
      const size_t at = (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) ? s.find(*sep, start)
                                                                                        : std::string_view::npos;
      if (at == std::string_view::npos || sep->empty()) break;
      check_list_items(parts.size() + 2);  // a string of separators splits into more parts than it has bytes
      parts.emplace_back(s.substr(start, at - start));
      start = at + sep->size();
    }
    parts.emplace_back(s.substr(start));
    return parts;
  }
  const std::u32string text = utf8_decode(s);
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_py_space(text[i])) ++i;
    if (i == text.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
      size_t end = text.size();
      while (end > i && is_py_space(text[end - 1])) --end;
      parts.push_back(utf8_encode(std::u32string_view(text).substr(i, end - i)));
      break;
    }
    const size_t start = i;
    check_list_items(parts.size() + 1);
    while (i < text.size() && !is_py_space(text[i])) ++i;
    parts.push_back(utf8_encode(std::u32string_view(text).substr(start, i - start)));
  }
  return parts;
}

// The result's size, checked before building: replacing into a long string
// can multiply it.
static void check_replaced_size(std::string_view s, std::string_view old, std::string_view with, int64_t count) {
  if (with.size() <= old.size()) return;  // cannot grow
  uint64_t n = 0;
  if (old.empty()) {
    n = code_point_count(s) + 1;
  } else {
    for (size_t at = s.find(old); at != std::string_view::npos; at = s.find(old, at + old.size())) ++n;
  }
  if (count >= 0) n = std::min<uint64_t>(n, static_cast<uint64_t>(count));
  check_string_bytes(static_cast<size_t>(n));  // so that the product below cannot wrap (with is within the cap)
  check_string_bytes(s.size() + static_cast<size_t>(n) * (with.size() - old.size()));
}

std::string py_replace(std::string_view s, std::string_view old, std::string_view with, int64_t count) {
  charge_scan(s.size());
  check_replaced_size(s, old, with, count);
  std::string out;
  if (old.empty()) {  // Python inserts `with` around every code point
    const std::u32string text = utf8_decode(s);
    int64_t done = 0;
    for (char32_t c : text) {
      if (count < 0 || done < count) out += with, ++done;
      out += utf8_encode(std::u32string(1, c));
    }
    if (count < 0 || done < count) out += with;
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t at = s.find(old, start);
    if (at == std::string_view::npos) break;
    out.append(s.substr(start, at - start));
    out.append(with);
    start = at + old.size();
    ++done;
  }
  out.append(s.substr(start));
  return out;
}

std::string to_upper(std::string_view s) { return map_case(s, to_upper); }
std::string to_lower(std::string_view s) { return map_case(s, to_lower); }

std::string py_capitalize(std::string_view s) {
  std::u32string text = utf8_decode(s);
  for (size_t k = 0; k < text.size(); ++k) text[k] = k == 0 ? to_upper(text[k]) : to_lower(text[k]);
  return utf8_encode(text);
}

std::string py_title(std::string_view s) {
  std::u32string text = utf8_decode(s);
  bool in_word = false;
  for (char32_t& c : text) {
    c = in_word ? to_lower(c) : to_upper(c);
    in_word = is_cased_letter(c);
  }
  return utf8_encode(text);
}

}  // namespace splitdec::jinja
