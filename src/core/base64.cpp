#include "core/base64.h"

#include "core/error.h"

#include <array>
#include <cstdint>

namespace splitdec {

namespace {
constexpr std::array<int8_t, 256> decode_table() {
  std::array<int8_t, 256> t{};
  for (auto& v : t) v = -1;
  const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (int i = 0; i < 64; ++i) t[uint8_t(alphabet[i])] = int8_t(i);
  return t;
}
constexpr auto kTable = decode_table();
bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
}  // namespace

std::optional<std::string> base64_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size() / 4 * 3);
  uint32_t acc = 0;
  int bits = 0, chars = 0, padding = 0;
  for (char c : text) {
    if (is_space(c)) continue;
    if (c == '=') {
      ++padding;
      ++chars;
      continue;
    }
    if (padding > 0) return std::nullopt;  // data after padding
    const int v = kTable[uint8_t(c)];
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    ++chars;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(char((acc >> bits) & 0xff));
    }
  }
  // Unpadded input is accepted as long as its length could have been padded.
  if (padding > 2 || (padding > 0 && chars % 4 != 0) || chars % 4 == 1) return std::nullopt;
  return out;
}

std::string decode_data_url(std::string_view url) {
  const size_t comma = url.find(',');
  if (url.substr(0, 5) != "data:" || comma == std::string_view::npos)
    throw InputError("a data: URL needs a ',' before its payload (data:<type>;base64,...)");
  const std::string_view header = url.substr(5, comma - 5);
  if (header.size() < 7 || header.substr(header.size() - 7) != ";base64")
    throw InputError("only base64 data: URLs are accepted (data:<type>;base64,...)");
  std::optional<std::string> bytes = base64_decode(url.substr(comma + 1));
  if (!bytes) throw InputError("the data: URL's payload is not valid base64");
  if (bytes->empty()) throw InputError("the data: URL's payload is empty");
  return std::move(*bytes);
}

}  // namespace splitdec
