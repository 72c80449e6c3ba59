#include "generate/text_stream.h"

#include <algorithm>

#include "io/tokenizer.h"

namespace splitdec {

namespace {

// A decoded tail that is an incomplete UTF-8 character shows as U+FFFD and
// may change with the next byte token: hold it back. All trailing U+FFFDs,
// since a tokenizer.json's ByteFallback writes one per byte of the run.
size_t stable_length(const std::string& s) {
  static const std::string replacement = "\xEF\xBF\xBD";
  size_t end = s.size();
  while (end >= 3 && s.compare(end - 3, 3, replacement) == 0) end -= 3;
  return end;
}

}  // namespace

bool TextStream::push(int token) {
  tokens_.push_back(token);
  const size_t searched = text_.size();
  text_ = tok_->decode(tokens_);
  const size_t cut = stops_->find(text_, searched);
  if (cut == std::string::npos) return false;
  text_.resize(cut);
  return true;
}

std::string TextStream::take_ready(bool finished) {
  size_t end = finished ? text_.size() : stable_length(text_);
  if (!finished) end = end >= stops_->hold_back() ? end - stops_->hold_back() : 0;
  std::string ready = end > emitted_ ? text_.substr(emitted_, end - emitted_) : std::string();
  emitted_ = std::max(emitted_, end);
  return ready;
}

}  // namespace splitdec
