#include "generate/stop_strings.h"

#include <algorithm>

#include "core/error.h"

namespace splitdec {

StopStrings::StopStrings(std::vector<std::string> stops) : stops_(std::move(stops)) {
  for (const std::string& s : stops_) {
    if (s.empty()) throw InputError("a stop string must not be empty");
    longest_ = std::max(longest_, s.size());
  }
}

size_t StopStrings::find(const std::string& text, size_t searched) const {
  // A match that ends in the new bytes starts at most longest - 1 bytes before them.
  const size_t from = std::min(searched >= longest_ ? searched - longest_ + 1 : 0, text.size());
  size_t cut = std::string::npos;
  for (const std::string& s : stops_) cut = std::min(cut, text.find(s, from));
  return cut;
}

}  // namespace splitdec
