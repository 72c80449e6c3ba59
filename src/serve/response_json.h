// The OpenAI response bodies: a whole chat.completion / text_completion,
// and the chunks of a streamed one, each as a server-sent event line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "serve/generation_job.h"

namespace splitdec {
class Tokenizer;
}

namespace splitdec::serve {

class ResponseWriter {
 public:
  // `echo`: text the reply starts with (/v1/completions' echo: the prompt).
  // `logprobs`: the tokenizer that names the tokens of `logprobs` when the
  // request asked for them; null: "logprobs": null.
  ResponseWriter(bool chat, std::string model, std::string echo = {}, const Tokenizer* logprobs = nullptr);

  // Non-streamed: the whole body.
  std::string completion(const GenerationOutcome& o) const;
  // Streamed: each returns one "data: {...}\n\n" event.
  std::string first_event() const;  // chat: the role; completions: the echoed prompt, if any
  std::string text_event(const std::string& text, const std::vector<TokenLogprob>& logprobs = {}) const;
  std::string finish_event(const std::string& finish_reason) const;
  std::string usage_event(const GenerationOutcome& o) const;
  static std::string error_event(const std::string& message, const std::string& type);
  static std::string done_event() { return "data: [DONE]\n\n"; }

 private:
  std::string chunk(const std::string& text, const char* finish_reason, bool role,
                    const std::vector<TokenLogprob>* logprobs = nullptr) const;
  nlohmann::json logprobs_json(const std::vector<TokenLogprob>& entries) const;
  bool chat_;
  std::string model_, id_, echo_;
  int64_t created_;
  const Tokenizer* tokenizer_;
  mutable size_t text_offset_;  // /v1/completions' text_offset of the next token (a stream's chunks in order)
};

}  // namespace splitdec::serve
