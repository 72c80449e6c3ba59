// Standard base64 (RFC 4648, '+' '/', '=' padding; whitespace ignored), for
// media sent inline (a server request's or a --messages file's data: URLs).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace splitdec {

// nullopt when `text` is not valid base64 (a bad character, a wrong length
// or misplaced padding).
std::optional<std::string> base64_decode(std::string_view text);

// The bytes of a base64 data: URL (data:<type>;base64,<payload>). Throws
// InputError saying what is wrong: no ',', not ';base64', a payload that is
// not base64 or is empty.
std::string decode_data_url(std::string_view url);

}  // namespace splitdec
