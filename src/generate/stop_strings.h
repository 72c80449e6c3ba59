// Stop strings: where one first appears in a reply, searched only where a
// new token could have completed it (a stop string may span tokens).
#pragma once

#include <string>
#include <vector>

namespace splitdec {

class StopStrings {
 public:
  StopStrings() = default;
  // Throws InputError for an empty string (it would match everywhere).
  explicit StopStrings(std::vector<std::string> stops);

  bool empty() const { return stops_.empty(); }
  // The earliest match in `text`, knowing that its first `searched` bytes
  // were already searched; npos when none.
  size_t find(const std::string& text, size_t searched) const;
  // Bytes at the end of a text that could still become a stop string.
  size_t hold_back() const { return longest_ > 1 ? longest_ - 1 : 0; }

 private:
  std::vector<std::string> stops_;
  size_t longest_ = 0;
};

}  // namespace splitdec
