// The OpenAI response bodies: a whole chat.completion / text_completion,
// and the chunks of a streamed one, each as a server-sent event line.
#pragma once

#include <cstdint>
#include <string>

#include "serve/generation_job.h"

namespace splitdec::serve {

class ResponseWriter {
 public:
  // `echo`: text the reply starts with (/v1/completions' echo: the prompt).
  ResponseWriter(bool chat, std::string model, std::string echo = {});

  // Non-streamed: the whole body.
  std::string completion(const GenerationOutcome& o) const;
  // Streamed: each returns one "data: {...}\n\n" event.
  std::string first_event() const;  // chat: the role; completions: the echoed prompt, if any
  std::string text_event(const std::string& text) const;
  std::string finish_event(const std::string& finish_reason) const;
  std::string usage_event(const GenerationOutcome& o) const;
  static std::string error_event(const std::string& message, const std::string& type);
  static std::string done_event() { return "data: [DONE]\n\n"; }

 private:
  std::string chunk(const std::string& text, const char* finish_reason, bool role) const;
  bool chat_;
  std::string model_, id_, echo_;
  int64_t created_;
};

}  // namespace splitdec::serve
