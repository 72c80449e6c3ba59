// One reply's text as tokens arrive: decoded, cut before a stop string, and
// released only when final - never half a UTF-8 character, never text of a
// run of byte tokens that the next byte token may still change, never a
// prefix of a stop string.
#pragma once

#include <string>
#include <vector>

#include "generate/stop_strings.h"

namespace splitdec {

class Tokenizer;

class TextStream {
 public:
  TextStream(const Tokenizer& tokenizer, const StopStrings& stops) : tok_(&tokenizer), stops_(&stops) {}
  // Adds a token. Returns true when the text now holds a stop string (it is cut before it).
  bool push(int token);
  // The text that became final since the last call; with `finished`, all of the rest.
  std::string take_ready(bool finished);
  const std::string& text() const { return text_; }

 private:
  const Tokenizer* tok_;
  const StopStrings* stops_;
  std::vector<int> tokens_;
  std::string text_;
  size_t emitted_ = 0;
  bool in_byte_run_ = false;   // tokens_ ends in byte-fallback tokens
  size_t byte_run_start_ = 0;  // the text's length before that run
};

}  // namespace splitdec
