#include "generate/text_stream.h"

#include <algorithm>

#include "tokenizer/tokenizer.h"

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

// A byte-fallback piece ("<0xE4>"). A run of them decodes as a whole: all
// valid UTF-8, or one U+FFFD per byte; so a byte token that follows may
// change the run's text, valid characters included.
bool is_byte_piece(const Tokenizer& tok, int token) {
  if (token < 0 || token >= tok.piece_count()) return false;
  const std::string p = tok.piece(token);
  return p.size() == 6 && p.compare(0, 3, "<0x") == 0 && p[5] == '>';
}

}  // namespace

bool TextStream::push(int token) {
  tokens_.push_back(token);
  const bool byte = is_byte_piece(*tok_, token);
  // text_ is still the decode of the tokens before this one: where a run starts.
  if (byte && !in_byte_run_) byte_run_start_ = text_.size();
  in_byte_run_ = byte;
  const size_t searched = text_.size();
  text_ = tok_->decode(tokens_);
  const size_t cut = stops_->find(text_, searched);
  if (cut == std::string::npos) return false;
  text_.resize(cut);
  return true;
}

std::string TextStream::take_ready(bool finished) {
  size_t end = finished ? text_.size() : stable_length(text_);
  if (!finished && in_byte_run_) end = std::min(end, byte_run_start_);
  if (!finished) {
    end = end >= stops_->hold_back() ? end - stops_->hold_back() : 0;
    // Holding back a stop string's length of bytes can end inside a UTF-8
    // character: release only whole ones, or a chunk ends in a partial
    // character that a JSON writer turns into U+FFFD (and the stream no
    // longer adds up to the final text).
    while (end > emitted_ && end < text_.size() && (static_cast<unsigned char>(text_[end]) & 0xC0) == 0x80) --end;
  }
  std::string ready = end > emitted_ ? text_.substr(emitted_, end - emitted_) : std::string();
  emitted_ = std::max(emitted_, end);
  return ready;
}

}  // namespace splitdec
