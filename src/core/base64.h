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

}  // namespace splitdec
