// Python's str operations as chat templates use them, on UTF-8 text: a
// template indexes, slices and measures by code point, as transformers'
// Python does, not by byte.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace splitdec::jinja {

std::u32string utf8_decode(std::string_view s);  // invalid bytes become U+FFFD
std::string utf8_encode(std::u32string_view s);
size_t code_point_count(std::string_view s);

// Python str.strip / lstrip / rstrip: `chars` absent strips Unicode white space.
std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
// Python str.split: no separator splits on runs of white space and drops empties.
std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit = -1);
std::string py_replace(std::string_view s, std::string_view old, std::string_view with, int64_t count = -1);
// Case mapping covers ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic.
std::string to_upper(std::string_view s);
std::string to_lower(std::string_view s);
std::string py_capitalize(std::string_view s);
std::string py_title(std::string_view s);

}  // namespace splitdec::jinja
